"""Kopf's decorators, with Kopf 1.45's signatures: `@bosun.on.create('kopfexamples')` and
the rest. The resource is named as in Kopf: plural, kind, short name (`'kex'`),
`'plural.group'`, or positional group, version and plural (`'kopf.dev', 'v1',
'kopfexamples'`); or by keyword (`group=`, `version=`, `plural=`, `kind=`, `singular=`,
`shortcut=`, `category=`).

Ids are Kopf's: the function's name (`id=` to choose), with `/<field>` appended when a field
is given. One id may serve several causes and resources (`@on.create` and `@on.update`
stacked on one function); `value=`, `old=` and `new=` of `None` mean "no filter", as in Kopf."""

from __future__ import annotations

import functools
import types
from typing import Any, Callable, Dict, Optional

from ._errors import ErrorsMode
from ._registry import PRESENT, Handler, Registry, Selector, get_default_registry

Fn = Callable[..., Any]

#: Kopf's names of the decorators' types (for annotations in users' code).
ActivityDecorator = ChangingDecorator = WatchingDecorator = DaemonDecorator = TimerDecorator = Callable[[Fn], Fn]
IndexingDecorator = WebhookDecorator = Callable[[Fn], Fn]

#: The resource arguments of a decorator, as Kopf names them.
_SELECTOR_ARGS = ("group", "version", "kind", "plural", "singular", "shortcut", "category")
#: Handler options, as Kopf names them, passed on to `Handler` as they are.
_OPTIONS = ("param", "errors", "timeout", "retries", "backoff", "labels", "annotations", "when", "interval", "idle",
            "initial_delay", "sharp", "cancellation_backoff", "cancellation_timeout")


def callable_id(fn: Fn) -> str:
    """A handler's default id, as Kopf derives it: the function's qualified name (its plain
    name for a function defined inside another), through `functools.partial` and
    `functools.wraps`."""
    while True:
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        else:
            break
    if isinstance(fn, types.FunctionType) and fn.__name__ == "<lambda>":
        # Kopf's `lambda:<path>:<line>` has characters no annotation key may hold.
        return f"lambda-{fn.__code__.co_firstlineno}"
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not qualname:
        return type(fn).__name__
    return qualname if "<" not in qualname else fn.__name__


def _field(field: Any) -> Optional[str]:
    if isinstance(field, (list, tuple)):
        field = ".".join(str(part) for part in field)
    return field or None


def _register(kind: str, given: Dict[str, Any]) -> Callable[[Fn], Fn]:
    """The decorator of one handler of `kind`, from the decorator's own arguments."""
    selector = None
    if "arg1" in given:
        selector = Selector.of((given["arg1"], given["arg2"], given["arg3"]),
                               **{name: given.get(name) for name in _SELECTOR_ARGS})
    field = _field(given.get("field"))
    if kind == "field" and not field:
        raise TypeError("@bosun.on.field needs field='spec.something'")
    value, old, new = given.get("value"), given.get("old"), given.get("new")
    if value is None and field and kind not in ("field", "update"):
        value = PRESENT  # Kopf: a field alone means "where the field is present"
    options = {name: given[name] for name in _OPTIONS if given.get(name) is not None}
    if kind == "delete":
        options["optional"] = bool(given.get("optional"))
    if kind == "resume":
        options["deleted"] = bool(given.get("deleted"))
    if kind in ("validate", "mutate"):
        operations = tuple(given.get("operations") or ()) + ((given["operation"],) if given.get("operation") else ())
        sub = given.get("subresource")
        options.update(operations=operations, subresources=() if sub is None else (sub,) if isinstance(sub, str) else tuple(sub),
                       side_effects=bool(given.get("side_effects")), fail_closed=not given.get("ignore_failures"))
    registry: Optional[Registry] = given.get("registry")

    def decorator(fn: Fn) -> Fn:
        handler_id = given.get("id") or callable_id(fn)
        if field:  # as Kopf: the field is the id's suffix, also after an explicit id
            handler_id = f"{handler_id}/{field}"
        (registry if registry is not None else get_default_registry()).add(Handler(
            id=handler_id, kind=kind, fn=fn, selector=selector, field=field,
            value=value, has_value=value is not None, old=old, has_old=old is not None, new=new, has_new=new is not None,
            **options,
        ))
        return fn

    return decorator


def resume(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
           shortcut=None, category=None, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None,
           retries=None, backoff=None, deleted=None, labels=None, annotations=None, when=None, field=None, value=None,
           registry=None) -> Callable[[Fn], Fn]:
    """Called for each existing object when the operator starts and nothing changed
    (Kopf's `@kopf.on.resume`); `deleted=True` also for objects being deleted."""
    return _register("resume", locals())


def create(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
           shortcut=None, category=None, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None,
           retries=None, backoff=None, labels=None, annotations=None, when=None, field=None, value=None,
           registry=None) -> Callable[[Fn], Fn]:
    """Called once when an object is first seen (Kopf's `@kopf.on.create`)."""
    return _register("create", locals())


def update(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
           shortcut=None, category=None, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None,
           retries=None, backoff=None, labels=None, annotations=None, when=None, field=None, value=None, old=None,
           new=None, registry=None) -> Callable[[Fn], Fn]:
    """Called when the object's essence changed (Kopf's `@kopf.on.update`); with `field=`,
    only when that field changed; `old=`/`new=` filter the values."""
    return _register("update", locals())


def delete(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
           shortcut=None, category=None, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None,
           retries=None, backoff=None, optional=None, labels=None, annotations=None, when=None, field=None, value=None,
           registry=None) -> Callable[[Fn], Fn]:
    """Called when the object is being deleted; a finalizer holds it until the handler
    succeeded, unless `optional=True` (Kopf's `@kopf.on.delete`)."""
    return _register("delete", locals())


def field(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
          shortcut=None, category=None, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None,
          retries=None, backoff=None, labels=None, annotations=None, when=None, field, value=None, old=None, new=None,
          registry=None) -> Callable[[Fn], Fn]:
    """Called when the value at `field` changed, on creation too (Kopf's `@kopf.on.field`);
    the handler's id is `<fn>/<field>`; `old`/`new` are the field's values."""
    return _register("field", locals())


def event(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
          shortcut=None, category=None, id=None, param=None, labels=None, annotations=None, when=None, field=None,
          value=None, registry=None) -> Callable[[Fn], Fn]:
    """Called for every raw watch event, the initial listing included; nothing is stored and
    failures are only logged (Kopf's `@kopf.on.event`). Gets `event` and `type`."""
    return _register("event", locals())


def index(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
          shortcut=None, category=None, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None,
          retries=None, backoff=None, labels=None, annotations=None, when=None, field=None, value=None,
          registry=None) -> Callable[[Fn], Fn]:
    """An in-memory index of the resource's objects (Kopf's `@kopf.index`): the function is
    called for every event of each matching object and what it returns is kept under the
    object; every handler gets the index as a kwarg named after it (`bosun.Index`). No other
    handler is called before the first listing is indexed. Errors are ignored by default."""
    if errors is None:
        errors = ErrorsMode.IGNORED
    return _register("index", locals())


def daemon(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
           shortcut=None, category=None, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None,
           retries=None, backoff=None, initial_delay=None, cancellation_backoff=None, cancellation_timeout=None,
           cancellation_polling=None, labels=None, annotations=None, when=None, field=None, value=None,
           registry=None) -> Callable[[Fn], Fn]:
    """Runs for as long as the object exists (Kopf's `@kopf.daemon`); gets `stopped`."""
    return _register("daemon", locals())


def timer(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
          shortcut=None, category=None, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None,
          retries=None, backoff=None, interval=None, initial_delay=None, sharp=None, idle=None, labels=None,
          annotations=None, when=None, field=None, value=None, registry=None) -> Callable[[Fn], Fn]:
    """Called every `interval` seconds while the object exists (Kopf's `@kopf.timer`)."""
    if interval is None:
        raise TypeError("@bosun.timer needs interval=SECONDS")
    return _register("timer", locals())


def startup(*, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None,
            registry=None) -> Callable[[Fn], Fn]:
    """Runs once when the controller starts; all must succeed before it watches anything.
    Gets `settings` (Kopf's `OperatorSettings`): what it changes goes to the controller."""
    return _register("startup", locals())


def cleanup(*, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None,
            registry=None) -> Callable[[Fn], Fn]:
    """Runs once when the controller exits."""
    return _register("cleanup", locals())


def login(*, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None,
          registry=None) -> Callable[[Fn], Fn]:
    """Logs the handler server's own API clients in when it starts (Kopf's `@kopf.on.login`),
    instead of the default login (`bosun.login_via_client`, which configures the `kubernetes`
    client). What it returns (a `ConnectionInfo`) is not used by the controller, which has its
    own credentials (kubeconfig, `--context`, or the pod's service account)."""
    return _register("login", locals())


def probe(*, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None,
          registry=None) -> Callable[[Fn], Fn]:
    """Runs on each liveness request (`bosun run --liveness URL`); the result goes into the
    probe's JSON under the handler's id."""
    return _register("probe", locals())


def validate(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
             shortcut=None, category=None, id=None, param=None, operation=None, operations=None, subresource=None,
             persistent=None, side_effects=None, ignore_failures=None, labels=None, annotations=None, when=None,
             field=None, value=None, registry=None) -> Callable[[Fn], Fn]:
    """Reviews admission requests: raise `bosun.AdmissionError` to deny (Kopf's `@kopf.on.validate`)."""
    return _register("validate", locals())


def mutate(arg1=None, arg2=None, arg3=None, /, *, group=None, version=None, kind=None, plural=None, singular=None,
           shortcut=None, category=None, id=None, param=None, operation=None, operations=None, subresource=None,
           persistent=None, side_effects=None, ignore_failures=None, labels=None, annotations=None, when=None,
           field=None, value=None, registry=None) -> Callable[[Fn], Fn]:
    """Reviews admission requests and may fill `patch` (Kopf's `@kopf.on.mutate`)."""
    return _register("mutate", locals())


def register(fn: Fn, *, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None, retries=None,
             backoff=None, labels=None, annotations=None, when=None) -> Fn:
    """Declares `fn` a sub-handler of the running handler (Kopf's `kopf.register`), as
    `@bosun.subhandler(...)` does; returns `fn`."""
    from ._subhandlers import subhandler as _subhandler

    return _subhandler(id=id, param=param, errors=errors, timeout=timeout, retries=retries, backoff=backoff,
                       labels=labels, annotations=annotations, when=when)(fn)


from ._subhandlers import subhandler  # noqa: E402  (Kopf has it as `kopf.on.subhandler` too)

__all__ = ["create", "update", "delete", "resume", "field", "event", "index", "daemon", "timer", "startup", "cleanup",
           "login", "probe", "validate", "mutate", "register", "subhandler"]
