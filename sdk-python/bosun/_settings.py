"""Kopf's `OperatorSettings`: the `settings` kwarg of startup handlers, with every section
and field of Kopf 1.45.2 and Kopf's defaults, so that operators that configure themselves run
unchanged.

The controller, not this process, does what most settings are about (watching, persistence,
peering, admission). What startup handlers change is sent back with their answer: `changes()`
lists it by dotted name, and `_settings_contract.to_contract()` maps it onto the contract's
`OperatorSettings`, each setting the controller has no use for named in `ignored` with why.
`posting.enabled` and `posting.level` also act here, on `bosun.event()` & co.

There is one settings object per process (`current()`), as Kopf has one per operator."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import warnings
from typing import Any, Callable, Dict, Iterable, Iterator, MutableMapping, Optional, Union

from ._storages import AnnotationsDiffBaseStorage, DiffBaseStorage, ProgressStorage, SmartProgressStorage


class SelectorMapping(MutableMapping[Any, Any]):
    """Values per resource (Kopf's `settings.watching.label_selectors` & co.), keyed as in the
    decorators: `'kopfexamples'`, `('kopf.dev', 'kopfexamples')`, `('kopf.dev', 'v1',
    'kopfexamples')` or a callable."""

    def __init__(self, items: Optional[Dict[Any, Any]] = None) -> None:
        self._items: Dict[Any, Any] = dict(items or {})

    @staticmethod
    def _key(key: Any) -> Any:
        if key is None:
            raise TypeError("Unsupported selector type: None")
        return key

    def __getitem__(self, key: Any) -> Any:
        return self._items[self._key(key)]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._items[self._key(key)] = value

    def __delitem__(self, key: Any) -> None:
        del self._items[self._key(key)]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._items!r})"


@dataclasses.dataclass
class ProcessSettings:
    """The operator's process."""

    ultimate_exiting_timeout: Optional[float] = 10 * 60


@dataclasses.dataclass
class PostingSettings:
    """Kubernetes events: explicit ones (`bosun.event()` & co.) and, with `loggers`, the
    objects' log lines of at least `level`."""

    enabled: bool = True
    loggers: bool = False
    level: int = logging.INFO
    default_backoffs: Union[float, Iterable[float]] = (1, 1, 2, 3, 5, 8, 13, 21)
    logging_backoffs: Union[float, Iterable[float]] = (1, 1, 2, 3, 5)
    worker_limit: Optional[int] = None
    idle_timeout: float = 1.0
    reporting_component: str = "kopf"
    reporting_instance: str = "dev"
    event_name_prefix: str = "kopf-event-"


@dataclasses.dataclass
class PeeringSettings:
    """Peering of operators serving the same resources."""

    name: str = "default"
    stealth: bool = False
    priority: int = 0
    lifetime: int = 60
    mandatory: bool = False
    standalone: bool = False
    clusterwide: bool = False

    @property
    def namespaced(self) -> bool:
        """The opposite of `clusterwide`."""
        return not self.clusterwide

    @namespaced.setter
    def namespaced(self, value: bool) -> None:
        self.clusterwide = not value


@dataclasses.dataclass
class WatchingSettings:
    """Watch requests."""

    server_timeout: Optional[float] = None
    client_timeout: Optional[float] = None
    connect_timeout: Optional[float] = None
    reconnect_backoff: float = 0.1
    inactivity_timeout: float = 70.0
    chunk_size: Optional[int] = None
    initial_streaming: bool = False
    label_selectors: SelectorMapping = dataclasses.field(default_factory=SelectorMapping)
    field_selectors: SelectorMapping = dataclasses.field(default_factory=SelectorMapping)
    shard_selectors: SelectorMapping = dataclasses.field(default_factory=SelectorMapping)


def _batching_removed() -> None:
    warnings.warn("Time-based event batching was removed. Please stop configuring it.", DeprecationWarning, stacklevel=3)


@dataclasses.dataclass
class QueueingSettings:
    """Per-object workers."""

    worker_limit: Optional[int] = None
    idle_timeout: float = 5.0
    exit_timeout: float = 2.0
    error_delays: Iterable[float] = (1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610)
    _batch_window: float = 0.1

    @property
    def batch_window(self) -> float:
        """Deprecated in Kopf; it affects nothing."""
        _batching_removed()
        return self._batch_window

    @batch_window.setter
    def batch_window(self, value: float) -> None:
        _batching_removed()
        self._batch_window = value


@dataclasses.dataclass
class ScanningSettings:
    """Observing namespaces and CRDs as they come and go."""

    disabled: bool = False


@dataclasses.dataclass
class AdmissionSettings:
    """Admission webhooks: how they are served (`WebhookServer` & co.) and the name of the
    webhook configurations kept (None: none kept)."""

    server: Optional[Callable[..., Any]] = None
    managed: Optional[str] = None


@dataclasses.dataclass
class ExecutionSettings:
    """Running handlers."""

    default_backoff: float = 60
    executor: concurrent.futures.Executor = dataclasses.field(default_factory=concurrent.futures.ThreadPoolExecutor)
    _max_workers: Optional[int] = None

    @property
    def max_workers(self) -> Optional[int]:
        """How many handlers run at once."""
        return self._max_workers

    @max_workers.setter
    def max_workers(self, value: int) -> None:
        if value < 1:
            raise ValueError("Can't set thread pool limit lower than 1.")
        self._max_workers = value
        if not hasattr(self.executor, "_max_workers"):
            raise TypeError("Current executor does not support `max_workers`.")
        self.executor._max_workers = value  # type: ignore[attr-defined]


@dataclasses.dataclass
class BackgroundSettings:
    """Daemons and timers."""

    cancellation_polling: float = 60
    instant_exit_timeout: Optional[float] = None
    instant_exit_zero_time_cycles: Optional[int] = 10


@dataclasses.dataclass
class NetworkingSettings:
    """API requests."""

    request_timeout: Optional[float] = 5 * 60
    connect_timeout: Optional[float] = None
    error_backoffs: Union[float, Iterable[float]] = (1, 1, 2, 3, 5, 8, 13, 21)
    enforce_retry_after: bool = False
    trust_env: bool = False


@dataclasses.dataclass
class PersistenceSettings:
    """What the operator keeps on objects: its finalizer, handlers' progress, the last handled
    state."""

    finalizer: str = "kopf.zalando.org/KopfFinalizerMarker"
    progress_storage: ProgressStorage = dataclasses.field(default_factory=SmartProgressStorage)
    diffbase_storage: DiffBaseStorage = dataclasses.field(default_factory=AnnotationsDiffBaseStorage)
    consistency_timeout: float = 5.0


@dataclasses.dataclass
class OperatorSettings:
    """All settings of an operator, by section (Kopf's `kopf.OperatorSettings`)."""

    process: ProcessSettings = dataclasses.field(default_factory=ProcessSettings)
    posting: PostingSettings = dataclasses.field(default_factory=PostingSettings)
    peering: PeeringSettings = dataclasses.field(default_factory=PeeringSettings)
    watching: WatchingSettings = dataclasses.field(default_factory=WatchingSettings)
    queueing: QueueingSettings = dataclasses.field(default_factory=QueueingSettings)
    scanning: ScanningSettings = dataclasses.field(default_factory=ScanningSettings)
    admission: AdmissionSettings = dataclasses.field(default_factory=AdmissionSettings)
    execution: ExecutionSettings = dataclasses.field(default_factory=ExecutionSettings)
    background: BackgroundSettings = dataclasses.field(default_factory=BackgroundSettings)
    networking: NetworkingSettings = dataclasses.field(default_factory=NetworkingSettings)
    persistence: PersistenceSettings = dataclasses.field(default_factory=PersistenceSettings)

    @property
    def batching(self) -> QueueingSettings:
        """Kopf's old name of `queueing`."""
        warnings.warn("Batching settings are now queueing settings. "
                      "Please rename `settings.batching` -> `settings.queueing`", DeprecationWarning, stacklevel=2)
        return self.queueing


_current: Optional[OperatorSettings] = None
_lock = threading.Lock()


def current() -> OperatorSettings:
    """The settings of this process, created on first use: what startup handlers get as
    `settings` and what `bosun.event()` & co. follow."""
    global _current
    if _current is None:
        with _lock:
            if _current is None:
                _current = OperatorSettings()
    return _current


def replace(settings: Optional[OperatorSettings]) -> Optional[OperatorSettings]:
    """Makes `settings` the process's (None: a fresh one on next use); returns the previous
    ones. For embedding (`operator(settings=...)`) and tests."""
    global _current
    with _lock:
        previous, _current = _current, settings
    return previous


def state_of(value: Any) -> Any:
    """What makes two setting values the same: scalars and collections by value, an executor
    by its class, other objects (storages, servers, selector mappings) by class and
    attributes, recursively."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(state_of(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(state_of(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((repr(k), state_of(v)) for k, v in value.items()))
    if isinstance(value, concurrent.futures.Executor):
        return (type(value), getattr(value, "_max_workers", None))
    if hasattr(value, "__dict__"):
        return (type(value), tuple(sorted((k, state_of(v)) for k, v in vars(value).items())))
    return value


def changes(settings: OperatorSettings) -> Dict[str, Any]:
    """The settings that differ from a fresh `OperatorSettings()`, by dotted name
    (`posting.level`, `persistence.progress_storage`…), with their values. Kopf's private
    fields behind properties count under the property's name (`execution.max_workers`)."""
    fresh = OperatorSettings()
    changed: Dict[str, Any] = {}
    for section_field in dataclasses.fields(OperatorSettings):
        section, default = getattr(settings, section_field.name), getattr(fresh, section_field.name)
        for field in dataclasses.fields(default):
            value = getattr(section, field.name)
            if state_of(value) != state_of(getattr(default, field.name)):
                changed[f"{section_field.name}.{field.name.lstrip('_')}"] = value
    # Setting `execution.max_workers` resizes the default executor too: that is one change.
    executor = settings.execution.executor
    if (type(executor) is concurrent.futures.ThreadPoolExecutor and "execution.max_workers" in changed
            and getattr(executor, "_max_workers", None) == settings.execution.max_workers):
        changed.pop("execution.executor", None)
    return changed
