"""What a Handle call carries, as handlers see it: JSON values decoded, the `diff` decoded when
first looked at, Kopf's `Resource` made once per resource; and a handler's values encoded."""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

from . import _bodies

_DIFF_OPS = {1: "add", 2: "change", 3: "remove"}


class Unusable(Exception):
    """A handler's return value or patch that cannot be sent."""


def json_value(data: bytes, default: Any = None) -> Any:
    return json.loads(data) if data else default


def dumps(value: Any, what: str) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":"), default=_bodies.json_default).encode()
    except (TypeError, ValueError) as e:
        raise Unusable(f"the handler's {what} is not JSON-serialisable: {e}") from None


def diff_item(item) -> Tuple[Any, ...]:
    from ._diffs import DiffOperation

    return DiffOperation(_DIFF_OPS.get(item.operation, "change")), tuple(item.path), json_value(item.old), json_value(item.new)


def diff(items) -> Any:
    """The call's `diff`, decoded when the handler first looks at it."""
    from ._diffs import WireDiff

    return WireDiff(items, diff_item)


_RESOURCES: Dict[Tuple[str, str, str, str, bool], Any] = {}


def resource(resource) -> Any:
    """Kopf's `Resource` of a call (immutable: one per resource, made once)."""
    key = (resource.group, resource.version, resource.plural, resource.kind, resource.namespaced)
    made = _RESOURCES.get(key)
    if made is None:
        from ._resources import Resource

        made = Resource(group=resource.group, version=resource.version, plural=resource.plural, kind=resource.kind or None,
                        namespaced=resource.namespaced)
        if len(_RESOURCES) < 1024:
            _RESOURCES[key] = made
    return made
