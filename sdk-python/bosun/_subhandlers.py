"""Sub-handlers, both ways Kopf has them: `@bosun.subhandler` inside a handler, and
`await bosun.execute(fns=...)`.

The controller records each declared sub-handler as `<parent>/<child>` with its own progress
and calls it by that id later. Python closures do not survive between calls, so to call a
child the server re-enters the parent with a throwaway answer (its patch, logs and events
are dropped) to rebuild the closures, as Kopf re-calls the parent, and then calls the child.

As in Kopf, `execute()` (called explicitly, or implicitly when the parent returns) waits for
the sub-handlers: while some are unfinished, the parent's code after it does not run and its
result is not stored. Once all are finished (succeeded or failed for good), the controller
calls the parent once more with their ids (`finished_subhandlers`): `execute()` returns there,
the rest of the parent runs, and its return value is stored."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Optional, Union

from . import _context
from ._errors import ErrorsMode


class SubhandlersDeclared(BaseException):
    """Raised by `execute` to end the parent while its sub-handlers are unfinished. A
    BaseException, so that a handler's `except Exception:` does not swallow it."""


def subhandler(*, id: Optional[str] = None, param: Any = None, errors: Optional[ErrorsMode] = None,
               timeout: Optional[float] = None, retries: Optional[int] = None, backoff: Optional[float] = None,
               labels: Optional[Mapping[str, Any]] = None, annotations: Optional[Mapping[str, Any]] = None,
               when: Optional[Callable[..., bool]] = None, field: Any = None, value: Any = None, old: Any = None,
               new: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declares a sub-handler of the running handler (Kopf's `@kopf.subhandler`). Its filters
    (`labels`, `annotations`, `when`, `field` with `value`, `old`, `new`) are checked against the
    parent's object and cause when it is declared: a sub-handler whose filters do not hold is
    not declared, as Kopf does not run it."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        call = _context.require("@bosun.subhandler")
        from .on import callable_id

        child_id = id or callable_id(fn)
        if not call.matches(labels=labels, annotations=annotations, when=when, field=field, value=value, old=old, new=new):
            return fn
        options = dict(errors=errors, timeout=timeout, retries=retries, backoff=backoff)
        call.subhandlers[child_id] = _context.SubhandlerDecl(child_id, fn, options, param)
        return fn

    return decorator


async def execute(*, fns: Union[None, Mapping[str, Callable[..., Any]], Iterable[Callable[..., Any]]] = None,
                  handlers: Any = None, registry: Any = None, lifecycle: Any = None, cause: Any = None) -> None:
    """Runs these functions as sub-handlers of the running handler (Kopf's `kopf.execute`):
    each gets its own progress, retries and result. `fns` is a dict of id → function or an
    iterable of functions (their names are the ids); without it, the sub-handlers declared
    so far with `@bosun.subhandler` are run. Returns once all of them are finished; until then
    the handler ends here and is called again later."""
    call = _context.require("bosun.execute()")
    if fns is not None:
        from .on import callable_id

        items = fns.items() if isinstance(fns, Mapping) else ((callable_id(fn), fn) for fn in fns)
        for child_id, fn in items:
            call.subhandlers[str(child_id)] = _context.SubhandlerDecl(str(child_id), fn, {}, None)
    call.executed = True
    if call.rebuilding or not set(call.subhandlers) <= call.finished:
        raise SubhandlersDeclared()
