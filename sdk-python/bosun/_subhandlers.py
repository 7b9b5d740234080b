"""Sub-handlers, both ways Kopf has them: `@bosun.subhandler` inside a handler, and
`await bosun.execute(fns=...)`.

The controller records each declared sub-handler as `<parent>/<child>` with its own progress
and calls it by that id later. Python closures do not survive between calls, so to call a
child the server re-enters the parent with a throwaway answer (its patch, logs and events
are dropped) to rebuild the closures, as Kopf re-calls the parent, and then calls the child.
`execute` ends the parent at that point; code after it does not run (in Kopf it runs once
all children succeeded)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Optional, Union

from . import _context
from ._errors import ErrorsMode


class SubhandlersDeclared(BaseException):
    """Raised by `execute` to end the parent once its sub-handlers are declared. A
    BaseException, so that a handler's `except Exception:` does not swallow it."""


def subhandler(*, id: Optional[str] = None, param: Any = None, errors: Optional[ErrorsMode] = None,
               timeout: Optional[float] = None, retries: Optional[int] = None, backoff: Optional[float] = None,
               **_ignored: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declares a sub-handler of the running handler (Kopf's `@kopf.subhandler`)."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        call = _context.require("@bosun.subhandler")
        child_id = id or fn.__name__
        options = dict(errors=errors, timeout=timeout, retries=retries, backoff=backoff)
        call.subhandlers[child_id] = _context.SubhandlerDecl(child_id, fn, options, param)
        return fn

    return decorator


async def execute(*, fns: Union[None, Mapping[str, Callable[..., Any]], Iterable[Callable[..., Any]]] = None,
                  handlers: Any = None, registry: Any = None, lifecycle: Any = None, cause: Any = None) -> None:
    """Runs these functions as sub-handlers of the running handler (Kopf's `kopf.execute`):
    each gets its own progress, retries and result. `fns` is a dict of id → function or an
    iterable of functions (their names are the ids); without it, the sub-handlers declared
    so far with `@bosun.subhandler` are run."""
    call = _context.require("bosun.execute()")
    if fns is not None:
        items = fns.items() if isinstance(fns, Mapping) else ((fn.__name__, fn) for fn in fns)
        for child_id, fn in items:
            call.subhandlers[str(child_id)] = _context.SubhandlerDecl(str(child_id), fn, {}, None)
    raise SubhandlersDeclared()
