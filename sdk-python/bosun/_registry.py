"""The handlers a server registers, and their Describe answer: one `Handler` per decorated
function, turned into a `HandlerSpec` of the contract."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ._errors import ErrorsMode
# The filter tokens of `labels=`, `annotations=`, `value=`… (Kopf's `MetaFilterToken`).
from ._filters import ABSENT, PRESENT


@dataclasses.dataclass(frozen=True)
class Selector:
    """A resource, as Kopf names them: by plural, kind, short name, `plural.group` or
    group/version/plural. Resolved by the controller through discovery."""

    group: str = ""
    version: str = ""
    name: str = ""

    @staticmethod
    def of(args: Tuple[Any, ...], group=None, version=None, kind=None, plural=None, singular=None,
           shortcut=None, category=None) -> "Selector":
        args = tuple(a for a in args if a is not None)
        named = [n for n in (plural, kind, singular, shortcut, category) if n]
        for given in (*args, *named, group, version):
            if given is not None and not isinstance(given, str):
                # Kopf's `kopf.EVERYTHING` and `lambda resource: …` select resources the
                # controller would have to list for the server; not supported yet.
                raise TypeError(f"the resource {given!r} is not a name: Bosun selects resources by name "
                                "(plural, kind, short name, category or group/version/plural); "
                                "kopf.EVERYTHING and callables are not supported yet")
        if len(args) > 3:
            raise TypeError(f"a resource is at most 3 positional arguments (group, version, name); got {args!r}")
        if len(named) > 1:
            raise TypeError(f"name the resource once: got {named!r}")
        g, v, n = group or "", version or "", named[0] if named else ""
        if len(args) == 3:
            g, v, n = args
        elif len(args) == 2:
            first, n = args
            if "/" in first:  # "group/version", name
                g, v = first.split("/", 1)
            elif "." in first:  # "group", name
                g = first
            else:  # "v1", "pods": the core group's version
                v = first
        elif len(args) == 1:
            n = args[0]
        if named and args:
            raise TypeError("name the resource either positionally or with plural=/kind=/…, not both")
        if not n:
            raise TypeError("which resource? give its plural, kind or short name, e.g. @bosun.on.create('kopfexamples')")
        if len(args) == 2 and not g and v == "v1":
            n = f"v1/{n}"  # core, explicitly
            v = ""
        return Selector(str(g), str(v), str(n))


@dataclasses.dataclass
class Handler:
    """One registered handler."""

    id: str
    kind: str  # create, update, delete, resume, field, event, timer, daemon, startup, cleanup, probe, validate, mutate, index
    fn: Callable[..., Any]
    selector: Optional[Selector] = None
    param: Any = None
    # Options
    retries: Optional[int] = None
    backoff: Optional[float] = None
    timeout: Optional[float] = None
    errors: Optional[ErrorsMode] = None
    optional: bool = False
    deleted: bool = False
    # Filters
    labels: Optional[Mapping[str, Any]] = None
    annotations: Optional[Mapping[str, Any]] = None
    when: Optional[Callable[..., bool]] = None
    field: Optional[str] = None
    value: Any = None
    old: Any = None
    new: Any = None
    has_value: bool = False
    has_old: bool = False
    has_new: bool = False
    # Timers and daemons
    interval: Optional[float] = None
    idle: Optional[float] = None
    initial_delay: Optional[float] = None
    sharp: bool = False
    cancellation_timeout: Optional[float] = None
    cancellation_backoff: Optional[float] = None
    # Admission
    operations: Tuple[str, ...] = ()
    subresources: Tuple[str, ...] = ()
    side_effects: bool = False
    fail_closed: bool = True
    #: The registration's own name in its registry, sent back by the controller with each call.
    key: str = ""

    @property
    def local_checks(self) -> List[Tuple[str, Any]]:
        """Filters the controller cannot evaluate (callables): the server checks them on each
        call and answers SKIPPED when one does not hold."""
        checks: List[Tuple[str, Any]] = []
        for key, cond in (self.labels or {}).items():
            if callable(cond):
                checks.append((f"labels.{key}", cond))
        for key, cond in (self.annotations or {}).items():
            if callable(cond):
                checks.append((f"annotations.{key}", cond))
        for name in ("value", "old", "new"):
            cond = getattr(self, name)
            if getattr(self, f"has_{name}") and callable(cond):
                checks.append((name, cond))
        if self.when is not None:
            checks.append(("when", self.when))
        return checks


class Registry:
    """All handlers of this handler server, in registration order (Kopf's `OperatorRegistry`).

    Handlers are keyed as Kopf keys them: one id may serve several causes (`@on.create` and
    `@on.update` stacked on one function are both `fn`) and several resources. Each
    registration gets a `key` of its own, which the controller sends back with every call
    (`handler_key`), so calls reach the right function. A second registration of the same kind,
    resource and id (a function defined again under the same name, as docs snippets do) is
    kept out: in Kopf the first one is the one that runs."""

    def __init__(self) -> None:
        self.handlers: List[Handler] = []
        self._by_key: Dict[str, Handler] = {}
        #: Resource → the kinds its handlers create as owned children (`owns`).
        self.owned: Dict[Selector, List[Selector]] = {}

    def add(self, handler: Handler) -> Handler:
        """Registers `handler` and returns it; an equal registration already there (same kind,
        resource and id) is returned instead, as only the first one would run in Kopf."""
        for known in self.handlers:
            if (known.kind, known.selector, known.id) == (handler.kind, handler.selector, handler.id):
                return known
        handler.key = str(len(self.handlers))
        self.handlers.append(handler)
        self._by_key[handler.key] = handler
        return handler

    def find(self, key: str, handler_id: str, kinds: Tuple[str, ...] = ()) -> Optional[Handler]:
        """The handler a call names: by its key, else (a controller that sends no key) the
        first of that id, of one of `kinds` when given."""
        if key:
            handler = self._by_key.get(key)
            return handler if handler is not None and handler.id == handler_id else None
        for handler in self.handlers:
            if handler.id == handler_id and (not kinds or handler.kind in kinds):
                return handler
        return None

    def get(self, handler_id: str) -> Optional[Handler]:
        """The first handler of this id."""
        return self.find("", handler_id)

    def __len__(self) -> int:
        return len(self.handlers)

    def clear(self) -> None:
        self.handlers.clear()
        self._by_key.clear()
        self.owned.clear()

    def owns(self, resource: Selector, kinds: List[Selector]) -> None:
        """Declares the kinds `resource`'s handlers create as owned children."""
        known = self.owned.setdefault(resource, [])
        known.extend(k for k in kinds if k not in known)

    def resource_settings(self, pb) -> List[Any]:
        """The contract's ResourceSettings: what each resource's handlers own."""
        def selector(s: Selector):
            return pb.ResourceSelector(group=s.group, version=s.version, name=s.name)
        return [pb.ResourceSettings(resource=selector(r), owns=[selector(k) for k in kinds])
                for r, kinds in self.owned.items()]

    def route(self, key: str, parent_id: str) -> Optional[Tuple[Handler, List[str]]]:
        """The top-level handler of a sub-handler whose parent is `parent_id`, and the chain of
        sub-handler ids below it (`fn/spec.x/a/b` → handler `fn/spec.x`, chain `[a, b]`). With
        a key, the handler is the key's; without, the longest registered id `parent_id` starts
        with."""
        if key:
            top = self._by_key.get(key)
            if top is None:
                return None
            if parent_id == top.id:
                return top, []
            if parent_id.startswith(top.id + "/"):
                return top, parent_id[len(top.id) + 1:].split("/")
            return None
        best: Optional[Handler] = None
        for handler in self.handlers:
            fits = parent_id == handler.id or parent_id.startswith(handler.id + "/")
            if fits and (best is None or len(handler.id) > len(best.id)):
                best = handler
        if best is None:
            return None
        return best, ([] if parent_id == best.id else parent_id[len(best.id) + 1:].split("/"))


#: Kopf's name of the registry class.
OperatorRegistry = Registry

_default = Registry()
#: The registry the decorators fill when given none, as the SDK was imported (see
#: `get_default_registry`, which follows `set_default_registry`).
default_registry = _default


def get_default_registry() -> Registry:
    """The registry the decorators fill when given none (Kopf's `kopf.get_default_registry`)."""
    return _default


def set_default_registry(registry: Registry) -> None:
    """Makes `registry` the one the decorators fill and the server serves by default (Kopf's
    `kopf.set_default_registry`)."""
    global _default
    _default = registry


def owns(resource: str, *kinds: str, registry: Optional[Registry] = None) -> None:
    """Declares the kinds `resource`'s handlers create as owned children (`bosun.adopt`), as
    controller-runtime's `Owns()`: the controller needs nothing of it to run, but `bosun rbac`
    grants get, create and patch on them. Resources are named as in the decorators:
    `bosun.owns('kopfexamples', 'v1/pods', 'deployments.apps')`."""
    if not kinds:
        raise TypeError("bosun.owns(resource, kind, ...): name at least one owned kind")
    (registry if registry is not None else get_default_registry()).owns(
        Selector.of((resource,)), [Selector.of((kind,)) for kind in kinds])


def _value_filter(pb, cond) -> Any:
    msg = pb.ValueFilter()
    if cond is PRESENT:
        msg.present = True
    elif cond is ABSENT:
        msg.absent = True
    else:
        msg.equals = json.dumps(cond).encode()
    return msg


_KINDS = {
    "create": "HANDLER_KIND_CREATE", "update": "HANDLER_KIND_UPDATE", "delete": "HANDLER_KIND_DELETE",
    "resume": "HANDLER_KIND_RESUME", "field": "HANDLER_KIND_FIELD", "event": "HANDLER_KIND_EVENT",
    "timer": "HANDLER_KIND_TIMER", "daemon": "HANDLER_KIND_DAEMON", "startup": "HANDLER_KIND_STARTUP",
    "cleanup": "HANDLER_KIND_CLEANUP", "probe": "HANDLER_KIND_PROBE", "validate": "HANDLER_KIND_VALIDATE",
    "mutate": "HANDLER_KIND_MUTATE", "index": "HANDLER_KIND_INDEX",
}

_ERRORS = {None: "ERRORS_MODE_TEMPORARY", ErrorsMode.TEMPORARY: "ERRORS_MODE_TEMPORARY",
           ErrorsMode.PERMANENT: "ERRORS_MODE_PERMANENT", ErrorsMode.IGNORED: "ERRORS_MODE_IGNORED"}


def default_backoff() -> Optional[float]:
    """Kopf's `settings.execution.default_backoff` when it was changed from its 60 s."""
    from . import _settings

    backoff = _settings.current().execution.default_backoff
    return None if backoff is None or float(backoff) == 60.0 else float(backoff)


def backoff_of(handler: Handler) -> Optional[float]:
    """The handler's backoff, else the operator's default backoff (None: the controller's 60 s)."""
    return handler.backoff if handler.backoff is not None else default_backoff()


def options_spec(pb, retries=None, backoff=None, timeout=None, errors=None, optional=False, deleted=False):
    """HandlerOptions of the contract from Kopf's arguments."""
    options = pb.HandlerOptions(errors=_ERRORS[errors], optional=bool(optional), deleted=bool(deleted))
    if retries is not None:
        options.retries = int(retries)
    if backoff is not None:
        options.backoff_seconds = float(backoff)
    if timeout is not None:
        options.timeout_seconds = float(timeout)
    return options


def handler_spec(pb, handler: Handler):
    """The contract's HandlerSpec of one handler."""
    spec = pb.HandlerSpec(id=handler.id, kind=_KINDS[handler.kind], key=handler.key)
    if handler.selector is not None:
        spec.resource.CopyFrom(pb.ResourceSelector(group=handler.selector.group, version=handler.selector.version,
                                                   name=handler.selector.name))
    filters = pb.Filters(has_when=bool(handler.local_checks))
    # Callable filters are the server's own (local_checks); the rest go to the controller.
    for key, cond in (handler.labels or {}).items():
        if not callable(cond):
            filters.labels[key].CopyFrom(_value_filter(pb, cond))
    for key, cond in (handler.annotations or {}).items():
        if not callable(cond):
            filters.annotations[key].CopyFrom(_value_filter(pb, cond))
    if handler.kind in ("field", "update"):  # the field whose changes matter
        spec.field = handler.field or ""
    if handler.field and (handler.kind != "field" or handler.has_value):  # what `value` checks
        filters.field = handler.field
    for name in ("value", "old", "new"):
        cond = getattr(handler, name)
        if getattr(handler, f"has_{name}") and not callable(cond):
            getattr(filters, name).CopyFrom(_value_filter(pb, cond))
    spec.filters.CopyFrom(filters)
    spec.options.CopyFrom(options_spec(pb, handler.retries, backoff_of(handler), handler.timeout, handler.errors,
                                       handler.optional, handler.deleted))
    if handler.kind == "timer":
        spec.timer.CopyFrom(pb.TimerOptions(interval_seconds=float(handler.interval or 0), idle_seconds=float(handler.idle or 0),
                                            initial_delay_seconds=float(handler.initial_delay or 0), sharp=bool(handler.sharp)))
    if handler.kind == "daemon":
        spec.daemon.CopyFrom(pb.DaemonOptions(initial_delay_seconds=float(handler.initial_delay or 0),
                                              # Kopf waits `cancellation_backoff`, then cancels and
                                              # waits `cancellation_timeout`: the controller holds
                                              # the object for both.
                                              cancellation_timeout_seconds=float(handler.cancellation_timeout or 0)
                                              + float(handler.cancellation_backoff or 0),
                                              backoff_seconds=float(handler.backoff if handler.backoff is not None else 0)))
    if handler.kind in ("validate", "mutate"):
        spec.admission.CopyFrom(pb.AdmissionOptions(operations=list(handler.operations), subresources=list(handler.subresources),
                                                    side_effects=bool(handler.side_effects), fail_closed=bool(handler.fail_closed)))
    return spec
