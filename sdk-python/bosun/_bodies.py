"""The object as handlers see it, as in Kopf: `body`, `spec`, `meta`, `status`, `labels` and
`annotations` are read-only views into the object's JSON, not copies. A missing section reads as
an empty mapping and is never created by looking at it (`spec.get('x', 1)` on an object without
a spec is 1). Also the type names of raw API data (`RawBody`, `RawEvent`, `BodyEssence`,
`ObjectReference`, `OwnerReference`) and the reference builders."""

from __future__ import annotations

from collections.abc import Mapping as _AbcMapping
from typing import Any, Dict, Iterator, List, Literal, Mapping, Optional, Tuple, TypedDict, TypeVar, Union

_K = TypeVar("_K")
_V = TypeVar("_V")

#: A path into an object, as a tuple of keys (Kopf's `kopf.FieldPath`).
FieldPath = Tuple[str, ...]
#: A path as users give it: `"spec.field"`, `("spec", "field")`, `["spec", "field"]` or None
#: for the root (Kopf's `kopf.FieldSpec`).
FieldSpec = Union[str, FieldPath, List[str], None]

#: The labels of an object, as the `labels` kwarg (a read-only view).
Labels = Mapping[str, str]
#: The annotations of an object, as the `annotations` kwarg (a read-only view).
Annotations = Mapping[str, str]

#: A raw watch event's type; None for the objects of the initial listing.
RawEventType = Literal[None, "ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


_PARSED: Dict[str, FieldPath] = {}


def parse_field(field: FieldSpec) -> FieldPath:
    """A field as users give it → a tuple of keys."""
    if field is None:
        return ()
    if type(field) is str:  # the views' own paths, on every call: parsed once
        parsed = _PARSED.get(field)
        if parsed is None:
            parsed = tuple(field.split("."))
            if len(_PARSED) < 4096:
                _PARSED[field] = parsed
        return parsed
    if isinstance(field, str):
        return tuple(field.split("."))
    if isinstance(field, (list, tuple)):
        return tuple(field)
    raise ValueError(f"a field is a dotted str or a list/tuple of keys, not {field!r}")


def _resolve(source: Any, path: FieldPath, default: Any) -> Any:
    node = source
    for key in path:
        # A dict first: `isinstance` against an ABC costs more than the rest of a lookup.
        if (type(node) is not dict and not isinstance(node, _AbcMapping)) or key not in node:
            return default
        node = node[key]
    return node


class MappingView(Mapping[_K, _V]):
    """A read-only view of the mapping at `path` in `source`, read anew on each access: absent
    or not a mapping, it reads as empty."""

    def __init__(self, __source: Mapping[Any, Any], __path: FieldSpec = None) -> None:
        self._source = __source
        self._path = parse_field(__path)

    def _target(self) -> Mapping[Any, Any]:
        target = _resolve(self._source, self._path, None)
        return target if type(target) is dict or isinstance(target, _AbcMapping) else {}

    def __getitem__(self, key: _K) -> _V:
        return self._target()[key]

    def __iter__(self) -> Iterator[_K]:
        return iter(self._target())

    def __len__(self) -> int:
        return len(self._target())

    def __repr__(self) -> str:
        return repr(dict(self))


class Meta(MappingView[str, Any]):
    """The object's `metadata` (Kopf's `kopf.Meta`), with its well-known fields as attributes."""

    def __init__(self, __body: Mapping[str, Any]) -> None:
        super().__init__(__body, "metadata")
        self._labels: MappingView[str, str] = MappingView(self, "labels")
        self._annotations: MappingView[str, str] = MappingView(self, "annotations")

    @property
    def labels(self) -> Labels:
        return self._labels

    @property
    def annotations(self) -> Annotations:
        return self._annotations

    @property
    def uid(self) -> str:
        return self.get("uid")  # type: ignore[return-value]

    @property
    def name(self) -> str:
        return self.get("name")  # type: ignore[return-value]

    @property
    def namespace(self) -> Optional[str]:
        """None for cluster-scoped objects."""
        return self.get("namespace")

    @property
    def creation_timestamp(self) -> Optional[str]:
        return self.get("creationTimestamp")

    @property
    def deletion_timestamp(self) -> Optional[str]:
        return self.get("deletionTimestamp")


class Spec(MappingView[str, Any]):
    """The object's `spec` (Kopf's `kopf.Spec`)."""

    def __init__(self, __body: Mapping[str, Any]) -> None:
        super().__init__(__body, "spec")


class Status(MappingView[str, Any]):
    """The object's `status` (Kopf's `kopf.Status`)."""

    def __init__(self, __body: Mapping[str, Any]) -> None:
        super().__init__(__body, "status")


class Body(MappingView[str, Any]):
    """The whole object (Kopf's `kopf.Body`): `body.metadata` (also `body.meta`),
    `body.spec`, `body.status` are views into it."""

    def __init__(self, __source: Mapping[str, Any]) -> None:
        super().__init__(__source)
        self._meta = Meta(self)
        self._spec = Spec(self)
        self._status = Status(self)

    @property
    def metadata(self) -> Meta:
        return self._meta

    @property
    def meta(self) -> Meta:
        return self._meta

    @property
    def spec(self) -> Spec:
        return self._spec

    @property
    def status(self) -> Status:
        return self._status


class RawMeta(TypedDict, total=False):
    """An object's metadata as the API sends it (the fields Kopf names)."""

    uid: str
    name: str
    namespace: str
    labels: Dict[str, str]
    annotations: Dict[str, str]
    finalizers: List[str]
    resourceVersion: str
    deletionTimestamp: str
    creationTimestamp: str
    selfLink: str


class RawBody(TypedDict, total=False):
    """An object as the API sends it (Kopf's `kopf.RawBody`)."""

    apiVersion: str
    kind: str
    metadata: RawMeta
    spec: Dict[str, Any]
    status: Dict[str, Any]


class RawEvent(TypedDict):
    """A watch event (Kopf's `kopf.RawEvent`): the `event` kwarg of `@on.event` handlers."""

    type: RawEventType
    object: RawBody


class MetaEssence(TypedDict, total=False):
    labels: Dict[str, str]
    annotations: Dict[str, str]


class BodyEssence(TypedDict, total=False):
    """What of an object is compared between changes (Kopf's `kopf.BodyEssence`): the
    `old` and `new` kwargs."""

    metadata: MetaEssence
    spec: Dict[str, Any]
    status: Dict[str, Any]


class ObjectReference(TypedDict, total=False):
    """A reference to an object, as events carry it (Kopf's `kopf.ObjectReference`)."""

    apiVersion: str
    kind: str
    namespace: Optional[str]
    name: str
    uid: str


class OwnerReference(TypedDict, total=False):
    """An entry of `metadata.ownerReferences` (Kopf's `kopf.OwnerReference`)."""

    controller: bool
    blockOwnerDeletion: bool
    apiVersion: str
    kind: str
    name: str
    uid: str


def json_default(value: Any) -> Any:
    """For `json.dumps(..., default=json_default)`: a view (any mapping) as a dict, so that
    handlers may return or patch in `spec` and the like as they are."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def build_object_reference(body: Mapping[str, Any]) -> ObjectReference:
    """A reference to `body` for events: its apiVersion, kind, name, uid and namespace, those
    that are set (a cluster-scoped object has no namespace)."""
    meta = body.get("metadata") or {}
    ref = {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "name": meta.get("name"),
           "uid": meta.get("uid"), "namespace": meta.get("namespace")}
    return {key: value for key, value in ref.items() if value}  # type: ignore[return-value]


def build_owner_reference(body: Mapping[str, Any], *, controller: Optional[bool] = True,
                          block_owner_deletion: Optional[bool] = True) -> OwnerReference:
    """An ownerReference to `body`, for its children; `controller` and
    `block_owner_deletion` left out when None."""
    meta = body.get("metadata") or {}
    ref = {"controller": controller, "blockOwnerDeletion": block_owner_deletion, "apiVersion": body.get("apiVersion"),
           "kind": body.get("kind"), "name": meta.get("name"), "uid": meta.get("uid")}
    return {key: value for key, value in ref.items() if value is not None}  # type: ignore[return-value]
