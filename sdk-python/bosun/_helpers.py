"""Kopf's helpers for children a handler creates with a client of its own (`adopt`, `label`,
`harmonize_naming`, `adjust_namespace`, `append_owner_reference`, `remove_owner_reference`), with
Kopf's signatures and rules, on dicts, `kubernetes`/`kubernetes_asyncio` models and pykube
objects; and Bosun's `own`, where the controller creates the child.

The owner is, by default, the object of the handler being called; outside a handler it must be
given."""

from __future__ import annotations

import enum
import json
import warnings
from typing import Any, Iterable, Mapping, MutableMapping, Optional, Union

from . import _context
from ._bodies import FieldSpec, OwnerReference, build_owner_reference, json_default
from ._objects import model_client, walk


class _Unset(enum.Enum):
    token = enum.auto()


_UNSET = _Unset.token


def _owner(owner: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    if owner is not None:
        return owner
    call = _context.current.get()
    if call is not None and call.body:
        return call.body
    raise LookupError("Owner must be set explicitly, since running outside of a handler.")


def _unsupported(obj: Any) -> TypeError:
    return TypeError(f"K8s object class is not supported: {type(obj)} (give a dict, a kubernetes model or a pykube object)")


def _model_meta(obj: Any) -> Any:
    """The model's metadata, created empty when it has none."""
    if obj.metadata is None:
        obj.metadata = model_client(obj).V1ObjectMeta()
    return obj.metadata


def append_owner_reference(objs: Any, owner: Optional[Mapping[str, Any]] = None, *,
                           controller: Optional[bool] = True, block_owner_deletion: Optional[bool] = True) -> None:
    """Adds an ownerReference to `owner` (default: the handled object) to each object that has
    none to it yet."""
    ref = build_owner_reference(_owner(owner), controller=controller, block_owner_deletion=block_owner_deletion)
    for obj in walk(objs):
        client = model_client(obj)
        if isinstance(obj, MutableMapping):
            refs = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
            if not any(r.get("uid") == ref.get("uid") for r in refs):
                refs.append(dict(ref))
        elif client is not None:
            meta = _model_meta(obj)
            if meta.owner_references is None:
                meta.owner_references = []
            if not any(r.uid == ref.get("uid") for r in meta.owner_references):
                meta.owner_references.append(_model_owner_reference(client, ref))
        else:
            raise _unsupported(obj)


def _model_owner_reference(client: Any, ref: OwnerReference) -> Any:
    return client.V1OwnerReference(api_version=ref.get("apiVersion"), kind=ref.get("kind"), name=ref.get("name"),
                                   uid=ref.get("uid"), controller=ref.get("controller"),
                                   block_owner_deletion=ref.get("blockOwnerDeletion"))


def remove_owner_reference(objs: Any, owner: Optional[Mapping[str, Any]] = None) -> None:
    """Removes the ownerReferences to `owner` (default: the handled object)."""
    uid = build_owner_reference(_owner(owner)).get("uid")
    for obj in walk(objs):
        if isinstance(obj, MutableMapping):
            refs = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
            refs[:] = [r for r in refs if r.get("uid") != uid]
        elif model_client(obj) is not None:
            meta = _model_meta(obj)
            if meta.owner_references is None:
                meta.owner_references = []
            meta.owner_references[:] = [r for r in meta.owner_references if r.uid != uid]
        else:
            raise _unsupported(obj)


def label(objs: Any, labels: Union[Mapping[str, Optional[str]], _Unset] = _UNSET, *, forced: bool = False,
          nested: Union[str, Iterable[FieldSpec], None] = None, force: Optional[bool] = None) -> None:
    """Puts `labels` (default: the handled object's) on each object, and on the sections at
    the `nested` paths that exist (`'spec.template'`); existing labels stay unless `forced`.
    `force=` is Kopf's deprecated spelling of `forced=`."""
    if force is not None:
        warnings.warn("force= is deprecated in label(); use forced=...", DeprecationWarning, stacklevel=2)
        forced = force
    if isinstance(labels, _Unset):
        labels = (_owner(None).get("metadata") or {}).get("labels") or {}
    paths = [nested] if isinstance(nested, str) else nested
    for obj in walk(objs, nested=paths):
        if isinstance(obj, MutableMapping):
            existing = obj.setdefault("metadata", {}).setdefault("labels", {})
        elif model_client(obj) is not None:
            meta = _model_meta(obj)
            if meta.labels is None:
                meta.labels = {}
            existing = meta.labels
        else:
            raise _unsupported(obj)
        for key, value in labels.items():
            if forced:
                existing[key] = value
            else:
                existing.setdefault(key, value)


def harmonize_naming(objs: Any, name: Union[str, None, _Unset] = _UNSET, *, forced: bool = False,
                     strict: bool = False) -> None:
    """Names unnamed objects after `name` (default: the handled object's): `generateName:
    <name>-`, or exactly `name` when `strict`; objects with a name or generateName keep it
    unless `forced`."""
    if isinstance(name, _Unset):
        name = (_owner(None).get("metadata") or {}).get("name")
    if name is None:
        raise LookupError("Name must be set explicitly: couldn't find it automatically.")
    for obj in walk(objs):
        if isinstance(obj, MutableMapping):
            unnamed = not set(obj.get("metadata") or {}) & {"name", "generateName"}
            if forced or unnamed:
                meta = obj.setdefault("metadata", {})
                if strict:
                    meta["name"] = name
                    meta.pop("generateName", None)
                else:
                    meta["generateName"] = f"{name}-"
                    meta.pop("name", None)
        elif model_client(obj) is not None:
            meta = _model_meta(obj)
            if forced or (meta.name is None and meta.generate_name is None):
                if strict:
                    meta.name, meta.generate_name = name, None
                else:
                    meta.name, meta.generate_name = None, f"{name}-"
        else:
            raise _unsupported(obj)


def adjust_namespace(objs: Any, namespace: Union[str, None, _Unset] = _UNSET, *, forced: bool = False) -> None:
    """Puts objects without a namespace into `namespace` (default: the handled object's)."""
    if isinstance(namespace, _Unset):
        namespace = (_owner(None).get("metadata") or {}).get("namespace")
    for obj in walk(objs):
        if isinstance(obj, MutableMapping):
            if forced or (obj.get("metadata") or {}).get("namespace") is None:
                obj.setdefault("metadata", {})["namespace"] = namespace
        elif model_client(obj) is not None:
            meta = _model_meta(obj)
            if forced or meta.namespace is None:
                meta.namespace = namespace
        else:
            raise _unsupported(obj)


def adopt(objs: Any, owner: Optional[Mapping[str, Any]] = None, *, forced: bool = False, strict: bool = False,
          nested: Union[str, Iterable[FieldSpec], None] = None) -> None:
    """Makes objects children of `owner` (default: the handled object): an ownerReference,
    the owner's namespace, a name after the owner, and the owner's labels."""
    owner = _owner(owner)
    meta = owner.get("metadata") or {}
    append_owner_reference(objs, owner=owner)
    harmonize_naming(objs, forced=forced, strict=strict, name=meta.get("name"))
    adjust_namespace(objs, forced=forced, namespace=meta.get("namespace"))
    label(objs, forced=forced, nested=nested, labels=meta.get("labels") or {})


def own(obj: Mapping[str, Any], *, apply: bool = False, copy_labels: bool = False) -> None:
    """Asks the controller to create `obj` (a dict with apiVersion and kind) as a child of the
    handled object: it adds the ownerReference, defaults the namespace and a stable name
    (`<owner>-<kind>`), and creates it (or server-side applies it with `apply=True`) after
    the handler succeeded. A failed creation fails the handler."""
    call = _context.require("bosun.own()")
    call.emit("owned", {"object": json.dumps(obj, default=json_default).encode(), "apply": bool(apply), "copy_labels": bool(copy_labels)})
