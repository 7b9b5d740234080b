"""Kopf's decorators: `@bosun.on.create('kopfexamples')` and the rest, with Kopf's arguments.
The resource is named as in Kopf: plural, kind, short name (`'kex'`), `'plural.group'`, or
positional group, version and plural (`'kopf.dev', 'v1', 'kopfexamples'`); or by keyword
(`group=`, `version=`, `plural=`, `kind=`, `singular=`, `shortcut=`, `category=`)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from ._errors import ErrorsMode
from ._registry import PRESENT, Handler, Registry, Selector, default_registry

_UNSET = object()

Fn = Callable[..., Any]


def _register(kind: str, args, *, id=None, registry: Optional[Registry] = None, group=None, version=None, kind_=None,
              plural=None, singular=None, shortcut=None, category=None, field=None, value=_UNSET, old=_UNSET,
              new=_UNSET, **options) -> Callable[[Fn], Fn]:
    selector = None
    if kind not in ("startup", "cleanup", "probe"):
        selector = Selector.of(args, group=group, version=version, kind=kind_, plural=plural, singular=singular,
                               shortcut=shortcut, category=category)
    field = ".".join(field) if isinstance(field, (list, tuple)) else field
    if kind == "field" and not field:
        raise TypeError("@bosun.on.field needs field='spec.something'")
    if value is _UNSET and field and kind not in ("field", "update"):
        value = PRESENT  # Kopf: a field alone means "where the field is present"

    def decorator(fn: Fn) -> Fn:
        handler_id = id or getattr(fn, "__name__", None) or repr(fn)
        if field:  # as Kopf: the field is the id's suffix, also after an explicit id
            handler_id = f"{handler_id}/{field}"
        (registry if registry is not None else default_registry).add(Handler(
            id=handler_id, kind=kind, fn=fn, selector=selector, field=field,
            value=None if value is _UNSET else value, has_value=value is not _UNSET,
            old=None if old is _UNSET else old, has_old=old is not _UNSET,
            new=None if new is _UNSET else new, has_new=new is not _UNSET,
            **options,
        ))
        return fn

    return decorator


def create(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, param=None,
           errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None, labels=None,
           annotations=None, when=None, field=None, value=_UNSET, group=None, version=None, kind=None, plural=None,
           singular=None, shortcut=None, category=None, registry=None) -> Callable[[Fn], Fn]:
    """Called once when an object is first seen (Kopf's `@kopf.on.create`)."""
    return _register("create", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, param=param, errors=errors, timeout=timeout,
                     retries=retries, backoff=backoff, labels=labels, annotations=annotations, when=when)


def update(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, param=None,
           errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None, labels=None,
           annotations=None, when=None, field=None, value=_UNSET, old=_UNSET, new=_UNSET, group=None, version=None,
           kind=None, plural=None, singular=None, shortcut=None, category=None, registry=None) -> Callable[[Fn], Fn]:
    """Called when the object's essence changed (Kopf's `@kopf.on.update`); with `field=`,
    only when that field changed; `old=`/`new=` filter the values."""
    return _register("update", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, old=old, new=new, param=param, errors=errors,
                     timeout=timeout, retries=retries, backoff=backoff, labels=labels, annotations=annotations,
                     when=when)


def delete(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, param=None,
           errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None, optional=None, labels=None,
           annotations=None, when=None, field=None, value=_UNSET, group=None, version=None, kind=None, plural=None,
           singular=None, shortcut=None, category=None, registry=None) -> Callable[[Fn], Fn]:
    """Called when the object is being deleted; a finalizer holds it until the handler
    succeeded, unless `optional=True` (Kopf's `@kopf.on.delete`)."""
    return _register("delete", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, param=param, errors=errors, timeout=timeout,
                     retries=retries, backoff=backoff, optional=bool(optional), labels=labels,
                     annotations=annotations, when=when)


def resume(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, param=None,
           errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None, deleted=None, labels=None,
           annotations=None, when=None, field=None, value=_UNSET, group=None, version=None, kind=None, plural=None,
           singular=None, shortcut=None, category=None, registry=None) -> Callable[[Fn], Fn]:
    """Called for each existing object when the operator starts and nothing changed
    (Kopf's `@kopf.on.resume`); `deleted=True` also for objects being deleted."""
    return _register("resume", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, param=param, errors=errors, timeout=timeout,
                     retries=retries, backoff=backoff, deleted=bool(deleted), labels=labels,
                     annotations=annotations, when=when)


def field(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, field, id=None, param=None,
          errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None, labels=None, annotations=None,
          when=None, value=_UNSET, old=_UNSET, new=_UNSET, group=None, version=None, kind=None, plural=None,
          singular=None, shortcut=None, category=None, registry=None) -> Callable[[Fn], Fn]:
    """Called when the value at `field` changed, on creation too (Kopf's `@kopf.on.field`);
    the handler's id is `<fn>/<field>`; `old`/`new` are the field's values."""
    return _register("field", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, old=old, new=new, param=param, errors=errors,
                     timeout=timeout, retries=retries, backoff=backoff, labels=labels, annotations=annotations,
                     when=when)


def event(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, param=None,
          labels=None, annotations=None, when=None, field=None, value=_UNSET, group=None, version=None, kind=None,
          plural=None, singular=None, shortcut=None, category=None, registry=None) -> Callable[[Fn], Fn]:
    """Called for every raw watch event, the initial listing included; nothing is stored and
    failures are only logged (Kopf's `@kopf.on.event`). Gets `event` and `type`."""
    return _register("event", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, param=param, labels=labels,
                     annotations=annotations, when=when)


def startup(*, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None,
            registry=None) -> Callable[[Fn], Fn]:
    """Runs once when the controller starts; all must succeed before it watches anything."""
    return _register("startup", (), id=id, registry=registry, param=param, errors=errors, timeout=timeout,
                     retries=retries, backoff=backoff)


def cleanup(*, id=None, param=None, errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None,
            registry=None) -> Callable[[Fn], Fn]:
    """Runs once when the controller exits."""
    return _register("cleanup", (), id=id, registry=registry, param=param, errors=errors, timeout=timeout,
                     retries=retries, backoff=backoff)


def probe(*, id=None, registry=None) -> Callable[[Fn], Fn]:
    """Runs on each liveness request (`bosun run --liveness URL`); the result goes into the
    probe's JSON under the handler's id."""
    return _register("probe", (), id=id, registry=registry)


def _admission(kind, args, id, operation, operations, subresource, side_effects, ignore_failures, registry, selector_kw,
               labels, annotations, when, field, value):
    ops = tuple(operations or ()) + ((operation,) if operation else ())
    subs = () if subresource is None else ((subresource,) if isinstance(subresource, str) else tuple(subresource))
    return _register(kind, args, id=id, registry=registry, **selector_kw, operations=ops, subresources=subs,
                     side_effects=bool(side_effects), fail_closed=not ignore_failures, labels=labels,
                     annotations=annotations, when=when, field=field, value=value)


def validate(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, operation=None,
             operations: Optional[Iterable[str]] = None, subresource=None, side_effects=None, ignore_failures=None,
             labels=None, annotations=None, when=None, field=None, value=_UNSET, group=None, version=None, kind=None,
             plural=None, singular=None, shortcut=None, category=None, persistent=None, registry=None):
    """Reviews admission requests: raise `bosun.AdmissionError` to deny (Kopf's `@kopf.on.validate`)."""
    return _admission("validate", (__group_or_groupversion_or_name, __version_or_name, __name), id, operation,
                      operations, subresource, side_effects, ignore_failures, registry,
                      dict(group=group, version=version, kind_=kind, plural=plural, singular=singular,
                           shortcut=shortcut, category=category), labels, annotations, when, field, value)


def mutate(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, operation=None,
           operations: Optional[Iterable[str]] = None, subresource=None, side_effects=None, ignore_failures=None,
           labels=None, annotations=None, when=None, field=None, value=_UNSET, group=None, version=None, kind=None,
           plural=None, singular=None, shortcut=None, category=None, persistent=None, registry=None):
    """Reviews admission requests and may fill `patch` (Kopf's `@kopf.on.mutate`)."""
    return _admission("mutate", (__group_or_groupversion_or_name, __version_or_name, __name), id, operation,
                      operations, subresource, side_effects, ignore_failures, registry,
                      dict(group=group, version=version, kind_=kind, plural=plural, singular=singular,
                           shortcut=shortcut, category=category), labels, annotations, when, field, value)


def index(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, param=None,
          errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None, labels=None,
          annotations=None, when=None, field=None, value=_UNSET, group=None, version=None, kind=None, plural=None,
          singular=None, shortcut=None, category=None, registry=None) -> Callable[[Fn], Fn]:
    """An in-memory index of the resource's objects (Kopf's `@kopf.index`): the function is
    called for every event of each matching object and what it returns is kept under the
    object; every handler gets the index as a kwarg named after it (`bosun.Index`). No other
    handler is called before the first listing is indexed. Errors are ignored by default."""
    return _register("index", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, param=param,
                     errors=ErrorsMode.IGNORED if errors is None else errors, timeout=timeout, retries=retries,
                     backoff=backoff, labels=labels, annotations=annotations, when=when)


def timer(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, param=None,
          errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None, interval=None, idle=None,
          initial_delay=None, sharp=None, labels=None, annotations=None, when=None, field=None, value=_UNSET,
          group=None, version=None, kind=None, plural=None, singular=None, shortcut=None, category=None,
          registry=None) -> Callable[[Fn], Fn]:
    """Called every `interval` seconds while the object exists (Kopf's `@kopf.timer`)."""
    if interval is None:
        raise TypeError("@bosun.timer needs interval=SECONDS")
    return _register("timer", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, param=param, errors=errors, timeout=timeout,
                     retries=retries, backoff=backoff, interval=interval, idle=idle, initial_delay=initial_delay,
                     sharp=bool(sharp), labels=labels, annotations=annotations, when=when)


def daemon(__group_or_groupversion_or_name=None, __version_or_name=None, __name=None, *, id=None, param=None,
           errors: Optional[ErrorsMode] = None, timeout=None, retries=None, backoff=None, initial_delay=None,
           cancellation_backoff=None, cancellation_timeout=None, cancellation_polling=None, labels=None,
           annotations=None, when=None, field=None, value=_UNSET, group=None, version=None, kind=None, plural=None,
           singular=None, shortcut=None, category=None, registry=None) -> Callable[[Fn], Fn]:
    """Runs for as long as the object exists (Kopf's `@kopf.daemon`); gets `stopped`."""
    return _register("daemon", (__group_or_groupversion_or_name, __version_or_name, __name), id=id, registry=registry,
                     group=group, version=version, kind_=kind, plural=plural, singular=singular, shortcut=shortcut,
                     category=category, field=field, value=value, param=param, errors=errors, timeout=timeout,
                     retries=retries, backoff=backoff, initial_delay=initial_delay,
                     cancellation_backoff=cancellation_backoff, cancellation_timeout=cancellation_timeout,
                     labels=labels, annotations=annotations, when=when)


__all__ = ["create", "update", "delete", "resume", "field", "event", "startup", "cleanup", "probe", "validate",
           "mutate"]
