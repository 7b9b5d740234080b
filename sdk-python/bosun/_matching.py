"""Kopf's filters, evaluated in the handler server: the callable ones of every handler (the
controller evaluates the rest), and all of a sub-handler's (the controller sees only the
sub-handlers that are declared).

As in Kopf, a callable label, annotation, value, old or new filter gets the value as its
first positional argument and the handler's kwargs after it (`def is_big(value, spec, **_)`);
a `when=` callable gets the kwargs alone."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from ._kwargs import _accepts, call_sync
from ._registry import ABSENT, PRESENT

#: A value that is not there at all (as opposed to a null one).
MISSING = object()


def value_at(body: Any, path: Optional[str]) -> Any:
    """The value at a dotted path of `body`, or MISSING."""
    node: Any = body
    for key in (path or "").split("."):
        if not key:
            continue
        if not isinstance(node, Mapping) or key not in node:
            return MISSING
        node = node[key]
    return node


def call_filter(check: Callable[..., Any], value: Any, kwargs: Dict[str, Any]) -> bool:
    """Calls a value filter Kopf's way: the value positionally, then the kwargs it accepts
    (but the one named like its first parameter, which the value fills)."""
    given = None if value is MISSING else value
    try:
        names = _accepts(check)
    except TypeError:  # unhashable callables
        names = None
    first = _first_parameter(check)
    rest = {k: v for k, v in kwargs.items() if k != first and k != "value" and (names is None or k in names)}
    return bool(check(given, **rest))


def _first_parameter(fn: Callable[..., Any]) -> Optional[str]:
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return params[0].name if params and params[0].kind in positional else None


def holds(cond: Any, values: Sequence[Any], kwargs: Dict[str, Any]) -> bool:
    """Whether a value, presence, absence or callable condition holds for any of `values`
    (Kopf checks the new value, then the old one)."""
    if cond is PRESENT:
        return any(v is not MISSING for v in values)
    if cond is ABSENT:
        return any(v is MISSING for v in values)
    if callable(cond):
        return any(call_filter(cond, v, kwargs) for v in values)
    return any(v is not MISSING and v == cond for v in values)


def meta_holds(conds: Optional[Mapping[str, Any]], actual: Optional[Mapping[str, Any]], kwargs: Dict[str, Any]) -> bool:
    """Whether labels or annotations satisfy every condition of a `labels=`/`annotations=`."""
    actual = actual or {}
    return all(holds(cond, [actual[key] if key in actual else MISSING], kwargs) for key, cond in (conds or {}).items())


def matches(kwargs: Dict[str, Any], body: Mapping[str, Any], *, labels=None, annotations=None, when=None, field=None,
            value=None, old=None, new=None) -> bool:
    """Whether all of Kopf's filters hold for one call (`None`: no filter)."""
    if not meta_holds(labels, kwargs.get("labels"), kwargs):
        return False
    if not meta_holds(annotations, kwargs.get("annotations"), kwargs):
        return False
    if isinstance(field, (list, tuple)):
        field = ".".join(field)
    if field:
        values = [value_at(body, field)]
        if value is not None and not holds(value, values, kwargs):
            return False
        if value is None and values[0] is MISSING and old is None and new is None:
            return False
    if old is not None and not holds(old, [_given(kwargs.get("old"))], kwargs):
        return False
    if new is not None and not holds(new, [_given(kwargs.get("new"))], kwargs):
        return False
    return when is None or bool(call_sync(when, kwargs))


def _given(value: Any) -> Any:
    return MISSING if value is None else value
