"""Kopf's helpers for children (`adopt`, `label`, `harmonize_naming`,
`append_owner_reference`), `own` (the controller creates and adopts a child), and posting
Kubernetes events (`info`, `warn`, `exception`, `event`)."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from . import _context

Obj = Dict[str, Any]
Objs = Union[Obj, Iterable[Obj]]


def _many(objs: Objs) -> List[Obj]:
    if isinstance(objs, Mapping):
        return [objs]  # type: ignore[list-item]
    return list(objs)


def _owner(owner: Optional[Mapping[str, Any]], what: str) -> Mapping[str, Any]:
    if owner is not None:
        return owner
    call = _context.current.get()
    if call is None:
        raise RuntimeError(f"{what}: give owner=… outside a handler call")
    return call.body


def append_owner_reference(objs: Objs, owner: Optional[Mapping[str, Any]] = None, *, controller: Optional[bool] = True,
                           block_owner_deletion: Optional[bool] = True) -> None:
    """Adds an ownerReference to `owner` (default: the handled object) to each object."""
    owner = _owner(owner, "append_owner_reference")
    meta = owner.get("metadata") or {}
    ref = {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "name": meta.get("name"),
           "uid": meta.get("uid")}
    if controller is not None:
        ref["controller"] = controller
    if block_owner_deletion is not None:
        ref["blockOwnerDeletion"] = block_owner_deletion
    for obj in _many(objs):
        refs = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
        if not any(r.get("uid") == ref["uid"] for r in refs):
            refs.append(dict(ref))


def remove_owner_reference(objs: Objs, owner: Optional[Mapping[str, Any]] = None) -> None:
    """Removes the ownerReference to `owner` (default: the handled object)."""
    uid = (_owner(owner, "remove_owner_reference").get("metadata") or {}).get("uid")
    for obj in _many(objs):
        meta = obj.setdefault("metadata", {})
        meta["ownerReferences"] = [r for r in meta.get("ownerReferences", []) if r.get("uid") != uid]


def harmonize_naming(objs: Objs, name: Optional[str] = None, *, forced: bool = False, strict: bool = False) -> None:
    """Names unnamed objects after the owner: `generateName: <name>-` (or `name` when
    `strict`), as Kopf does."""
    if name is None:
        name = ((_owner(None, "harmonize_naming").get("metadata") or {}).get("name"))
    for obj in _many(objs):
        meta = obj.setdefault("metadata", {})
        if forced or (not meta.get("name") and not meta.get("generateName")):
            if strict:
                meta["name"] = name
                meta.pop("generateName", None)
            else:
                meta.pop("name", None)
                meta["generateName"] = f"{name}-"


def adjust_namespace(objs: Objs, namespace: Optional[str] = None, *, forced: bool = False) -> None:
    """Puts objects without a namespace into the owner's namespace."""
    if namespace is None:
        namespace = (_owner(None, "adjust_namespace").get("metadata") or {}).get("namespace")
    for obj in _many(objs):
        meta = obj.setdefault("metadata", {})
        if namespace and (forced or not meta.get("namespace")):
            meta["namespace"] = namespace


def label(objs: Objs, labels: Optional[Mapping[str, Optional[str]]] = None, *, forced: bool = False,
          nested: Union[None, str, Iterable[str]] = None) -> None:
    """Copies labels (default: the handled object's) onto objects, and onto `nested` paths
    such as `spec.template` too; existing labels stay unless `forced`."""
    if labels is None:
        labels = ((_owner(None, "label").get("metadata") or {}).get("labels") or {})
    paths = [nested] if isinstance(nested, str) else list(nested or [])
    for obj in _many(objs):
        targets = [obj]
        for path in paths:
            node = obj
            for key in path.split("."):
                node = node.setdefault(key, {})
            targets.append(node)
        for target in targets:
            existing = target.setdefault("metadata", {}).setdefault("labels", {})
            for key, value in labels.items():
                if forced or key not in existing:
                    if value is None:
                        existing.pop(key, None)
                    else:
                        existing[key] = value


def adopt(objs: Objs, owner: Optional[Mapping[str, Any]] = None, *, forced: bool = False, strict: bool = False,
          nested: Union[None, str, Iterable[str]] = None) -> None:
    """Makes objects children of `owner` (default: the handled object), as Kopf's
    `kopf.adopt`: an ownerReference, the owner's namespace, a name after the owner, and the
    owner's labels. For children you create with a client of your own."""
    owner = _owner(owner, "adopt")
    meta = owner.get("metadata") or {}
    append_owner_reference(objs, owner=owner)
    harmonize_naming(objs, name=meta.get("name"), forced=forced, strict=strict)
    adjust_namespace(objs, namespace=meta.get("namespace"), forced=forced)
    label(objs, labels=meta.get("labels") or {}, forced=forced, nested=nested)


def own(obj: Mapping[str, Any], *, apply: bool = False, copy_labels: bool = False) -> None:
    """Asks the controller to create `obj` (a dict with apiVersion and kind) as a child of the
    handled object: it adds the ownerReference, defaults the namespace and a stable name
    (`<owner>-<kind>`), and creates it (or server-side applies it with `apply=True`) after
    the handler succeeded. A failed creation fails the handler."""
    call = _context.require("bosun.own()")
    call.emit("owned", {"object": json.dumps(obj).encode(), "apply": bool(apply), "copy_labels": bool(copy_labels)})


def _ref(obj: Mapping[str, Any], call: Optional[_context.Call]) -> Optional[Dict[str, str]]:
    meta = obj.get("metadata") or {}
    if call is not None and meta.get("uid") and meta.get("uid") == (call.body.get("metadata") or {}).get("uid"):
        return None  # the handled object: the controller fills the reference
    return {"api_version": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "namespace": meta.get("namespace") or "",
            "name": meta.get("name") or "", "uid": meta.get("uid") or ""}


def event(objs: Objs, *, type: str, reason: str, message: str = "") -> None:
    """Posts a Kubernetes event about each object (Kopf's `kopf.event`)."""
    call = _context.current.get()
    if call is None:
        import logging
        logging.getLogger("bosun").warning("bosun.event() outside a handler call is not posted: %s %s", reason, message)
        return
    for obj in _many(objs):
        call.emit("event", {"type": type, "reason": reason, "message": str(message)[:1024], "regarding": _ref(obj, call)})


def info(objs: Objs, *, reason: str, message: str = "") -> None:
    """Posts a `Normal` event (Kopf's `kopf.info`)."""
    event(objs, type="Normal", reason=reason, message=message)


def warn(objs: Objs, *, reason: str, message: str = "") -> None:
    """Posts a `Warning` event (Kopf's `kopf.warn`)."""
    event(objs, type="Warning", reason=reason, message=message)


def exception(objs: Objs, *, reason: str = "", message: str = "", exc: Optional[BaseException] = None) -> None:
    """Posts an event with the exception's text (default: the one being handled), as Kopf's
    `kopf.exception`; its type is `Warning` (Kopf's `Error` is not a type the events API
    accepts from every client)."""
    if exc is None:
        import sys
        exc = sys.exc_info()[1]
    text = f"{message} {exc}".strip() if exc else message  # as Kopf: the message, then the exception's text
    event(objs, type="Warning", reason=reason, message=text)


