"""What startup handlers changed in `settings`, as the contract's `OperatorSettings`: each
change the controller can apply goes into its field; every other one is named in `ignored`
with why (`queueing.batch_window: the controller batches nothing`), so the controller can log
it once.

Pure: `changes` comes from `_settings.changes()`; `pb` is the generated contract module."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import _storages as storages
from . import _webhooks as webhooks

_NOT_HERE = "not in the contract: the controller keeps its own"

#: Why each setting the contract has no field for is ignored (by dotted name, or by section).
_WHY: Mapping[str, str] = {
    "process": "the controller's own process: it stops within its shutdown timeouts",
    "posting.default_backoffs": "the controller retries posting events its own way",
    "posting.logging_backoffs": "the controller retries posting events its own way",
    "posting.worker_limit": "the controller posts events itself",
    "posting.idle_timeout": "the controller posts events itself",
    "posting.reporting_component": "the controller reports events as itself",
    "posting.reporting_instance": "the controller reports events as itself",
    "posting.event_name_prefix": "the controller names its events itself",
    "peering.stealth": _NOT_HERE,
    "peering.lifetime": "give it as `bosun run --peering-lifetime`",
    "peering.clusterwide": "the peering follows the controller's namespaces (`-A` or `-n`)",
    "watching.client_timeout": "the controller takes a watch for stuck 5 s after its server timeout",
    "watching.connect_timeout": _NOT_HERE,
    "watching.reconnect_backoff": _NOT_HERE,
    "watching.inactivity_timeout": "the controller takes a watch for stuck 5 s after its server timeout "
                                   "(`bosun run --inactivity-timeout`)",
    "watching.chunk_size": "the controller lists in pages of its own size",
    "watching.initial_streaming": _NOT_HERE,
    "watching.label_selectors": "the controller has no server-side selectors; use labels= filters",
    "watching.field_selectors": "the controller has no server-side selectors; use field= filters",
    "watching.shard_selectors": "give `bosun run --shards auto` to share objects between replicas",
    "queueing.batch_window": "the controller batches nothing",
    "queueing": "the controller runs one worker per object and schedules them itself",
    "scanning.disabled": "the controller watches the resources of its handlers, found at start",
    "execution.default_backoff": "each handler's backoff= applies (60 s by default)",
    "execution.executor": "sync handlers run in the handler server's own threads",
    "background": "the controller stops daemons and timers itself",
    "networking": "the controller makes its own API requests, with its own timeouts and retries",
    "persistence.consistency_timeout": "the controller waits for its own patches itself",
}

#: The least event level posted, as the contract's LogLine levels.
_LEVELS: Tuple[Tuple[int, str], ...] = ((logging.DEBUG, "LEVEL_DEBUG"), (logging.INFO, "LEVEL_INFO"),
                                       (logging.WARNING, "LEVEL_WARNING"), (logging.ERROR, "LEVEL_ERROR"))


def _why(name: str) -> str:
    return _WHY.get(name) or _WHY.get(name.split(".")[0]) or _NOT_HERE


def _level(level: int, ignored: List[str]) -> str:
    for floor, name in _LEVELS:
        if level <= floor:
            return name
    ignored.append(f"posting.level: {level} is above ERROR; the controller posts ERROR and up")
    return "LEVEL_ERROR"


def _progress(pb: Any, name: str, storage: Any, ignored: List[str]) -> Any:
    """A progress storage as the contract's StateStorage."""
    if isinstance(storage, storages.MultiProgressStorage) and type(storage) is not storages.SmartProgressStorage:
        inner = list(storage.storages)
        if not inner:
            ignored.append(f"{name}: a MultiProgressStorage with no storages")
            return None
        if len(inner) > 1:
            ignored.append(f"{name}: a MultiProgressStorage is kept in its first storage only")
        return _progress(pb, name, inner[0], ignored)
    if type(storage) is storages.SmartProgressStorage:
        annotations, status = list(storage.storages)
        if status.field != ("status", "kopf", "progress"):
            ignored.append(f"{name}.field: the contract carries only the annotations of a SmartProgressStorage")
        storage = annotations
    if type(storage) is storages.AnnotationsProgressStorage:
        if storage.verbose:
            ignored.append(f"{name}.verbose: the controller writes compact records")
        if storage.touch_key != "touch-dummy":
            ignored.append(f"{name}.touch_key: the controller touches objects with its own key")
        return pb.StateStorage(kind=pb.StateStorage.KIND_ANNOTATIONS, prefix=storage.prefix, v1=bool(storage.v1))
    if type(storage) in (storages.StatusProgressStorage, storages.NoWriteStatusProgressStorage):
        return pb.StateStorage(kind=pb.StateStorage.KIND_STATUS, field=".".join(storage.field))
    ignored.append(f"{name}: {type(storage).__name__} is custom code; the controller keeps progress itself")
    return None


def _diffbase(pb: Any, name: str, storage: Any, ignored: List[str]) -> Any:
    """A diffbase storage as the contract's StateStorage."""
    if type(storage) is storages.MultiDiffBaseStorage:
        inner = list(storage.storages)
        if not inner:
            ignored.append(f"{name}: a MultiDiffBaseStorage with no storages")
            return None
        if len(inner) > 1:
            ignored.append(f"{name}: a MultiDiffBaseStorage is kept in its first storage only")
        if storage.ignored_fields:
            ignored.append(f"{name}.ignored_fields: the controller ignores no fields of its own")
        return _diffbase(pb, name, inner[0], ignored)
    if type(storage) in (storages.AnnotationsDiffBaseStorage, storages.StatusDiffBaseStorage) and storage.ignored_fields:
        ignored.append(f"{name}.ignored_fields: the controller ignores no fields of its own")
    if type(storage) is storages.AnnotationsDiffBaseStorage:
        return pb.StateStorage(kind=pb.StateStorage.KIND_ANNOTATIONS, prefix=storage.prefix, key=storage.key,
                               v1=bool(storage.v1))
    if type(storage) is storages.StatusDiffBaseStorage:
        return pb.StateStorage(kind=pb.StateStorage.KIND_STATUS, field=".".join(storage.field))
    ignored.append(f"{name}: {type(storage).__name__} is custom code; the controller keeps the diffbase itself")
    return None


def _listen(addr: Optional[str], port: Optional[int]) -> str:
    """Kopf's `addr` and `port` as `host:port` (no addr: all interfaces; no port: any free)."""
    if addr is None and port is None:
        return ""
    host = addr or "0.0.0.0"
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass  # a host name
    return f"{host}:{port or 0}"


_SERVER_DEFAULTS = {"path": None, "cadata": None, "cadump": None, "context": None, "insecure": False,
                    "password": None, "extra_sans": (), "verify_mode": None, "verify_cafile": None,
                    "verify_capath": None, "verify_cadata": None, "file_check_interval": 60.}
_SERVERS = (webhooks.WebhookServer, webhooks.WebhookK3dServer, webhooks.WebhookMinikubeServer,
            webhooks.WebhookDockerDesktopServer, webhooks.WebhookAutoServer)


def _server(pb: Any, name: str, server: Any, ignored: List[str]) -> Any:
    """A webhook server as the contract's AdmissionServer."""
    if server is None:
        ignored.append(f"{name}: None; the controller serves webhooks once admission handlers exist")
        return None
    if type(server) not in _SERVERS:
        ignored.append(f"{name}: {type(server).__name__} cannot run in the controller, which serves webhooks itself "
                       "(`bosun run --admission-url` for a tunnel)")
        return None
    for attr, default in _SERVER_DEFAULTS.items():
        value = getattr(server, attr, default)
        if value != default and not (attr == "extra_sans" and not list(value)):
            ignored.append(f"{name}.{attr}: the controller's webhook server has no such option")
    if type(server) is webhooks.WebhookAutoServer:
        ignored.append(f"{name}: no cluster guessing; the controller's default address applies")
    host = server.host or type(server).DEFAULT_HOST or ""
    return pb.AdmissionServer(listen=_listen(server.addr, server.port), host=host, certfile=str(server.certfile or ""),
                              pkeyfile=str(server.pkeyfile or ""), cafile=str(server.cafile or ""))


def _scalar(field: str, convert: Callable[[Any], Any]) -> Callable[[Any, Any, str, Any, List[str]], None]:
    def put(pb: Any, msg: Any, name: str, value: Any, ignored: List[str]) -> None:
        if value is None:
            ignored.append(f"{name}: None; the controller's own value applies")
            return
        setattr(msg, field, convert(value))
    return put


def _message(field: str, build: Callable[[Any, str, Any, List[str]], Any]) -> Callable[..., None]:
    def put(pb: Any, msg: Any, name: str, value: Any, ignored: List[str]) -> None:
        built = build(pb, name, value, ignored)
        if built is not None:
            getattr(msg, field).CopyFrom(built)
    return put


def _posting_level(pb: Any, msg: Any, name: str, value: Any, ignored: List[str]) -> None:
    level = logging.getLevelName(value.upper()) if isinstance(value, str) else value
    if not isinstance(level, int):
        ignored.append(f"{name}: {value!r} is not a logging level")
        return
    msg.posting_level = getattr(pb.LogLine, _level(level, ignored))


#: The settings the contract carries, and how each is put into it.
_SUPPORTED: Dict[str, Callable[..., None]] = {
    "persistence.finalizer": _scalar("finalizer", str),
    "persistence.progress_storage": _message("progress_storage", _progress),
    "persistence.diffbase_storage": _message("diffbase_storage", _diffbase),
    "posting.enabled": _scalar("posting_enabled", bool),
    "posting.loggers": _scalar("posting_loggers", bool),
    "posting.level": _posting_level,
    "watching.server_timeout": _scalar("watching_server_timeout_seconds", float),
    "execution.max_workers": _scalar("max_workers", int),
    "peering.name": _scalar("peering_name", str),
    "peering.priority": _scalar("peering_priority", int),
    "peering.standalone": _scalar("peering_standalone", bool),
    "peering.mandatory": _scalar("peering_mandatory", bool),
    "admission.managed": _scalar("admission_managed", str),
    "admission.server": _message("admission_server", _server),
}


def to_contract(pb: Any, changes: Mapping[str, Any]) -> Any:
    """The contract's `OperatorSettings` for `changes` (dotted name → value)."""
    msg = pb.OperatorSettings()
    ignored: List[str] = []
    for name in sorted(changes):
        put = _SUPPORTED.get(name)
        if put is None:
            ignored.append(f"{name}: {_why(name)}")
        else:
            put(pb, msg, name, changes[name], ignored)
    msg.ignored.extend(ignored)
    return msg
