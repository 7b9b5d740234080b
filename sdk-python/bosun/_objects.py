"""Kubernetes objects as users hold them when they build children: plain dicts, `kubernetes`
client models (`V1Pod`…), `kubernetes_asyncio` models, and `pykube-ng` objects. The helpers
(`adopt`, `label`, events…) accept any of them, as Kopf's do, so this module tells them apart
without importing any client library: an object of a library exists only once its module is
loaded, so its classes are looked up in `sys.modules`."""

from __future__ import annotations

import sys
from typing import Any, Iterable, Iterator, Mapping, Optional

from ._bodies import FieldSpec, parse_field

#: Where each client library keeps its models, and the package with V1ObjectMeta & co.
_MODEL_PACKAGES = (("kubernetes.client.models.", "kubernetes.client"),
                   ("kubernetes_asyncio.client.models.", "kubernetes_asyncio.client"))


def model_client(obj: Any) -> Optional[Any]:
    """The client package (with `V1ObjectMeta`, `V1OwnerReference`) when `obj` is a model of
    `kubernetes` or `kubernetes_asyncio`, else None."""
    for klass in type(obj).__mro__:
        module = klass.__module__ or ""
        for prefix, package in _MODEL_PACKAGES:
            if module.startswith(prefix):
                return sys.modules.get(package)
    return None


def is_pykube(obj: Any) -> bool:
    """Whether `obj` is a pykube-ng API object (its dict is `obj.obj`)."""
    objects = sys.modules.get("pykube.objects")
    return objects is not None and isinstance(obj, objects.APIObject)


def resolve_model(obj: Any, field: FieldSpec) -> Any:
    """The value at `field` in a model, by JSON names (`spec.jobTemplate` is
    `obj.spec.job_template`); raises AttributeError or KeyError when it is not there."""
    node = obj
    for key in parse_field(field):
        if isinstance(node, Mapping):
            node = node[key]
        elif model_client(node) is not None:
            names = [attr for attr, json_key in getattr(node, "attribute_map", {}).items() if json_key == key]
            node = getattr(node, names[0] if names else key)
        else:
            node = getattr(node, key)
        if node is None:
            raise KeyError(key)
    return node


def walk(objs: Any, *, nested: Optional[Iterable[FieldSpec]] = None) -> Iterator[Any]:
    """Each object in `objs` (one object or any nesting of iterables of them), then the
    sections at the `nested` paths of each that has them: a pykube object as its dict, a model
    as itself, a mapping as itself."""
    if objs is None:
        return
    if is_pykube(objs):
        yield from walk(objs.obj, nested=nested)
    elif model_client(objs) is not None or isinstance(objs, Mapping):
        yield objs
        for path in nested or ():
            try:
                yield resolve_model(objs, path)
            except (AttributeError, KeyError, TypeError):
                pass  # not there: nothing to label
    elif isinstance(objs, Iterable) and not isinstance(objs, (str, bytes)):
        for obj in objs:
            yield from walk(obj, nested=nested)
    else:
        yield objs


def as_reference_source(obj: Any) -> Mapping[str, Any]:
    """What `build_object_reference` reads, also from a model: apiVersion, kind, metadata."""
    if isinstance(obj, Mapping):
        return obj
    if model_client(obj) is not None:
        meta = getattr(obj, "metadata", None)
        return {"apiVersion": getattr(obj, "api_version", None), "kind": getattr(obj, "kind", None),
                "metadata": {"name": getattr(meta, "name", None), "uid": getattr(meta, "uid", None),
                             "namespace": getattr(meta, "namespace", None)}}
    raise TypeError(f"not a Kubernetes object: {type(obj).__name__} (give a dict, a kubernetes model or a pykube object)")
