"""Kopf's `patch` kwarg: a dict that handlers fill, sent as one JSON merge patch (`None`
deletes a key). `patch.spec`, `patch.status` and `patch.meta` (also `patch.metadata`, with
`.labels` and `.annotations`) are writable views: a section appears once something is written
into it, never by looking at it.

`patch.fns` holds transformation functions (`fn(body)` mutating a copy of the object in place),
for changes a merge patch cannot say by itself, such as appending to a list. They need the
object: a patch made with `Patch(body=...)` turns them into merge-patch changes (lists are
replaced whole, as merge patches do) when it is sent."""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, MutableMapping, Optional, TypeVar

from ._bodies import FieldPath, MappingView, RawBody

#: A transformation of the object, appended to `patch.fns`.
PatchFn = Callable[[RawBody], None]

_K = TypeVar("_K")
_V = TypeVar("_V")

log = logging.getLogger("bosun")


def _ensure(target: MutableMapping[Any, Any], path: FieldPath, value: Any) -> None:
    for key in path[:-1]:
        node = target.get(key)
        if not isinstance(node, MutableMapping):
            node = target[key] = {}
        target = node
    target[path[-1]] = value


class MutableMappingView(MappingView[_K, _V], MutableMapping[_K, _V]):
    """A writable view: writing creates the missing sections on the way."""

    def __setitem__(self, key: _K, value: _V) -> None:
        _ensure(self._source, self._path + (key,), value)  # type: ignore[arg-type]

    def __delitem__(self, key: _K) -> None:
        target = self._target()
        if key not in target:
            raise KeyError(key)
        del target[key]  # type: ignore[attr-defined]


class MetaPatch(MutableMappingView[str, Any]):
    """The patch's `metadata`, with `.labels` and `.annotations`."""

    def __init__(self, __patch: "Patch") -> None:
        super().__init__(__patch, "metadata")
        self._labels: MutableMappingView[str, Optional[str]] = MutableMappingView(self, "labels")
        self._annotations: MutableMappingView[str, Optional[str]] = MutableMappingView(self, "annotations")

    @property
    def labels(self) -> MutableMappingView[str, Optional[str]]:
        return self._labels

    @property
    def annotations(self) -> MutableMappingView[str, Optional[str]]:
        return self._annotations


class SpecPatch(MutableMappingView[str, Any]):
    """The patch's `spec`."""

    def __init__(self, __patch: "Patch") -> None:
        super().__init__(__patch, "spec")


class StatusPatch(MutableMappingView[str, Any]):
    """The patch's `status`."""

    def __init__(self, __patch: "Patch") -> None:
        super().__init__(__patch, "status")


class Patch(Dict[str, Any]):
    """The `patch` kwarg (Kopf's `kopf.Patch`): a merge patch, plus `fns`."""

    def __init__(self, src: Optional[Mapping[str, Any]] = None, /, body: Optional[Mapping[str, Any]] = None,
                 fns: Iterable[PatchFn] = ()) -> None:
        super().__init__(src or {})
        self._meta = MetaPatch(self)
        self._spec = SpecPatch(self)
        self._status = StatusPatch(self)
        self._original = body
        self._fns: List[PatchFn] = (list(src.fns) if isinstance(src, Patch) else []) + list(fns)

    def __repr__(self) -> str:
        texts = [super().__repr__()] if len(self) else []
        texts += [f"fns={self._fns!r}"] if self._fns else []
        return f"{type(self).__name__}({', '.join(texts)})"

    def __bool__(self) -> bool:
        return len(self) > 0 or bool(self._fns)

    def clear(self) -> None:
        super().clear()
        self._fns.clear()

    @property
    def fns(self) -> List[PatchFn]:
        return self._fns

    @property
    def metadata(self) -> MetaPatch:
        return self._meta

    @property
    def meta(self) -> MetaPatch:
        return self._meta

    @property
    def spec(self) -> SpecPatch:
        return self._spec

    @property
    def status(self) -> StatusPatch:
        return self._status

    def as_json_patch(self, body: Optional[Mapping[str, Any]] = None) -> List[Dict[str, Any]]:
        """The changes as JSON-patch operations against `body` (default: the patch's own
        object), `fns` included; lists are replaced whole."""
        base = body if body is not None else self._original
        if not self:
            return []
        if base is None:
            raise ValueError("Cannot build a JSON-patch without the original body as a reference.")
        before = copy.deepcopy(dict(base))
        after = _merged(copy.deepcopy(before), _plain(self))
        for fn in self._fns:
            fn(after)
        return json_patch(before, after)


def _merged(body: Any, patch: Any) -> Any:
    """`body` with a merge patch applied (RFC 7386), as a new value."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(body) if isinstance(body, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merged(result.get(key), value)
    return result


def merge_diff(old: Any, new: Any) -> Dict[str, Any]:
    """The merge patch that turns `old` into `new` (both objects)."""
    patch: Dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif isinstance(value, Mapping) and isinstance(old[key], Mapping):
            nested = merge_diff(old[key], value)
            if nested:
                patch[key] = nested
        elif value != old[key]:
            patch[key] = value
    return patch


def _pointer(path: FieldPath) -> str:
    return "".join("/" + str(key).replace("~", "~0").replace("/", "~1") for key in path)


def json_patch(old: Mapping[str, Any], new: Mapping[str, Any], path: FieldPath = ()) -> List[Dict[str, Any]]:
    """The JSON-patch operations (RFC 6902) that turn `old` into `new`."""
    ops: List[Dict[str, Any]] = []
    for key in sorted(old.keys() - new.keys(), key=str):
        ops.append({"op": "remove", "path": _pointer(path + (key,))})
    for key, value in new.items():
        if key not in old:
            ops.append({"op": "add", "path": _pointer(path + (key,)), "value": value})
        elif isinstance(value, Mapping) and isinstance(old[key], Mapping):
            ops.extend(json_patch(old[key], value, path + (key,)))
        elif value != old[key]:
            ops.append({"op": "replace", "path": _pointer(path + (key,)), "value": value})
    return ops


def _plain(patch: Any) -> Any:
    """The patch as plain dicts, without the empty sections that only looking left."""
    if isinstance(patch, Mapping):
        out = {}
        for key, value in patch.items():
            value = _plain(value)
            if isinstance(value, dict) and not value:
                continue
            out[key] = value
        return out
    return patch


def prune(patch: Any) -> Any:
    """What is sent for a handler's `patch`: plain dicts without empty sections, with the
    changes of `patch.fns` added when the patch knows the object (`Patch(body=...)`)."""
    plain = _plain(patch)
    fns = getattr(patch, "fns", None)
    if not fns:
        return plain
    original = getattr(patch, "_original", None)
    if original is None:
        log.warning("patch.fns are dropped: this patch does not know the object to apply them to")
        return plain
    before = copy.deepcopy(dict(original))
    after = _merged(copy.deepcopy(before), plain)
    for fn in fns:
        fn(after)
    return merge_diff(before, after)

