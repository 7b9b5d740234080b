"""Kopf's `resource` kwarg: which resource the object is of (`kopf.Resource`), and
`EVERYTHING`, the marker for all resources in selectors."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Dict, FrozenSet, Iterator, List, Mapping, Optional


class Marker(enum.Enum):
    """Special resource selectors."""

    EVERYTHING = enum.auto()


#: Selects every resource, built-in and custom (`@kopf.on.event(kopf.EVERYTHING)`).
EVERYTHING = Marker.EVERYTHING


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Resource:
    """A resource (Kopf's `kopf.Resource`): its API group (`''` for the core group),
    version and plural, which identify it (equality, hashing), and what else is known of it.
    Iterates as `(group, version, plural)`. `api_version` and `name` are Bosun's additions."""

    group: str
    version: str
    plural: str
    kind: Optional[str] = None
    singular: Optional[str] = None
    shortcuts: FrozenSet[str] = frozenset()
    categories: FrozenSet[str] = frozenset()
    subresources: FrozenSet[str] = frozenset()
    namespaced: Optional[bool] = None
    preferred: bool = True
    verbs: FrozenSet[str] = frozenset()

    def __hash__(self) -> int:
        return hash((self.group, self.version, self.plural))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resource):
            return (self.group, self.version, self.plural) == (other.group, other.version, other.plural)
        return NotImplemented

    def __repr__(self) -> str:
        plural, *subresources = self.plural.split("/")
        text = f"{plural}.{self.version}.{self.group}".strip(".")
        return text + (f"/{'/'.join(subresources)}" if subresources else "")

    def __iter__(self) -> Iterator[str]:
        return iter((self.group, self.version, self.plural))

    def __getitem__(self, key: str) -> Any:
        """`resource['plural']`: Bosun passed the resource as a dict before it was Kopf's
        class; the fields read the same."""
        if key not in _DICT_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    @property
    def api_version(self) -> str:
        """`group/version`, or `version` for the core group (as in an object's apiVersion)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """`plural.group`, or `plural` for the core group (as kubectl and CRDs name it)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def get_url(self, *, server: Optional[str] = None, namespace: Optional[str] = None, name: Optional[str] = None,
                subresource: Optional[str] = None, params: Optional[Dict[str, str]] = None) -> str:
        """The API path (or URL, with `server`) of the resource's list, or of one object with
        `name`, in `namespace` or cluster-wide, optionally of a `subresource`."""
        if subresource is not None and name is None:
            raise ValueError("Subresources can be used only with specific resources by their name.")
        if not self.namespaced and namespace is not None:
            raise ValueError("Specific namespaces are not supported for cluster-scoped resources.")
        if self.namespaced and namespace is None and name is not None:
            raise ValueError("Specific namespaces are required for specific namespaced resources.")
        in_namespace = bool(self.namespaced and namespace is not None)
        parts: List[Optional[str]] = [
            "/api" if self.group == "" and self.version == "v1" else "/apis", self.group, self.version,
            "namespaces" if in_namespace else None, namespace if in_namespace else None,
            self.plural, name, subresource,
        ]
        path = "/".join(part for part in parts if part)
        import urllib.parse  # here: a handler server never needs it otherwise

        query = urllib.parse.urlencode(params, encoding="utf-8") if params else ""
        url = f"{path}?{query}" if query else path
        return url if server is None else f"{server.rstrip('/')}/{url.lstrip('/')}"


_DICT_KEYS = frozenset({"group", "version", "plural", "kind", "namespaced"})


def review_resource(resource: Mapping[str, Any]) -> Resource:
    """The `resource` of an admission review (`{group, version, resource}`) as a `Resource`."""
    return Resource(group=resource.get("group") or "", version=resource.get("version") or "",
                    plural=resource.get("resource") or "")
