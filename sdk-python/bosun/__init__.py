"""Bosun's Python SDK: Kopf's API for handlers that the Bosun controller calls over gRPC.

    import bosun

    @bosun.on.create('kopfexamples')
    def create_fn(spec, logger, **kwargs):
        logger.info(f"And here we are! Creating: {spec}")
        return {'message': 'hello world'}

Run it with the controller: `bosun dev handlers.py` (embedded dev cluster) or
`bosun run handlers.py -A` (the cluster of your kubeconfig). `python -m bosun handlers.py`
serves the handlers alone, where `BOSUN_LISTEN` says (`host:port` or `unix:///path`).

Every public name of Kopf 1.45.2 is here too, so that `import bosun as kopf` runs Kopf code;
README.md ("Kopf's names in Bosun") says which act and which are accepted and ignored.
"""

from . import lifecycles, on
from ._bodies import (Annotations, Body, BodyEssence, FieldPath, FieldSpec, Labels, Meta, ObjectReference,
                      OwnerReference, RawBody, RawEvent, RawEventType, Spec, Status, build_object_reference,
                      build_owner_reference)
from ._diffs import Diff, DiffItem, DiffOperation
from ._embedded import configure, operator, run
from ._errors import (AdmissionError, ErrorsMode, HandlerError, HandlerRetriesError, HandlerTimeoutError,
                      PermanentError, TemporaryError)
from ._filters import ABSENT, PRESENT, all_, any_, none_, not_
from ._helpers import (adjust_namespace, adopt, append_owner_reference, harmonize_naming, label, own,
                       remove_owner_reference)
from ._index import Index, Store
from ._kwargs import (AsyncDaemonStopperChecker, DaemonStopped, DaemonStoppingReason, HandlerId, Memo, Reason,
                      SyncDaemonStopperChecker)
from ._loggers import LocalObjectLogger, LogFormat, Logger, ObjectLogger
from ._patches import Patch, PatchFn
from ._posting import event, exception, info, warn
from ._registry import OperatorRegistry, Registry, default_registry, get_default_registry, owns, set_default_registry
from ._login import (ConnectionInfo, LoginError, login_via_async_client, login_via_client, login_via_pykube,
                     login_with_kubeconfig, login_with_service_account)
from ._resources import EVERYTHING, Resource
from ._reviews import (Headers, Operation, SSLPeer, UserInfo, WebhookClientConfig, WebhookClientConfigService,
                       WebhookFn, WebhookServerProtocol)
from ._server import serve, serve_forever
from ._sessions import AiohttpSession
from ._settings import OperatorSettings
from ._storages import (AnnotationsDiffBaseStorage, AnnotationsProgressStorage, DiffBaseStorage, MultiDiffBaseStorage,
                        MultiProgressStorage, ProgressRecord, ProgressStorage, SmartProgressStorage,
                        StatusDiffBaseStorage, StatusProgressStorage)
from ._subhandlers import execute, subhandler
from ._tasks import run_tasks, spawn_tasks
from ._webhooks import (WebhookAutoServer, WebhookAutoTunnel, WebhookDockerDesktopServer, WebhookK3dServer,
                        WebhookMinikubeServer, WebhookNgrokTunnel, WebhookServer)
from .lifecycles import get_default_lifecycle, set_default_lifecycle
from .on import daemon, index, register, timer


def __getattr__(name: str) -> str:
    """`bosun.__version__`, looked up when asked: importlib.metadata (with email, zipfile,
    csv…) costs a handler server about 2 MiB it never needs otherwise."""
    if name != "__version__":
        raise AttributeError(f"module 'bosun' has no attribute {name!r}")
    try:
        from importlib.metadata import version

        return version("bosun-operator")
    except Exception:  # running from a source tree
        return "0.0.0+source"


__all__ = [
    # Bosun's own
    "Registry", "default_registry", "own", "owns", "serve", "serve_forever", "HandlerError",
    # Handlers and running
    "on", "timer", "daemon", "index", "subhandler", "execute", "operator", "run", "configure",
    "spawn_tasks", "run_tasks", "lifecycles", "get_default_lifecycle", "set_default_lifecycle",
    # Handlers' kwargs and their types
    "Body", "Spec", "Status", "Meta", "Labels", "Annotations", "Patch", "PatchFn", "Diff", "DiffItem",
    "DiffOperation", "Resource", "EVERYTHING", "Reason", "Memo", "Index", "Store", "DaemonStopped",
    "DaemonStoppingReason", "SyncDaemonStopperChecker", "AsyncDaemonStopperChecker", "HandlerId", "Logger",
    "ObjectLogger", "LocalObjectLogger", "LogFormat", "RawBody", "RawEvent", "RawEventType", "BodyEssence",
    "ObjectReference", "OwnerReference", "FieldPath", "FieldSpec", "UserInfo", "Headers", "SSLPeer", "Operation",
    # Filters
    "PRESENT", "ABSENT", "all_", "any_", "none_", "not_",
    # Errors
    "TemporaryError", "PermanentError", "AdmissionError", "HandlerTimeoutError", "HandlerRetriesError", "ErrorsMode",
    # Helpers: children, references, events
    "adopt", "label", "harmonize_naming", "append_owner_reference", "remove_owner_reference", "adjust_namespace",
    "build_object_reference", "build_owner_reference", "info", "warn", "exception", "event",
    # Settings
    "OperatorSettings", "ProgressRecord", "ProgressStorage", "AnnotationsProgressStorage", "StatusProgressStorage",
    "MultiProgressStorage", "SmartProgressStorage", "DiffBaseStorage", "AnnotationsDiffBaseStorage",
    "StatusDiffBaseStorage", "MultiDiffBaseStorage", "WebhookServer", "WebhookAutoServer", "WebhookAutoTunnel",
    "WebhookK3dServer", "WebhookMinikubeServer", "WebhookDockerDesktopServer", "WebhookNgrokTunnel",
    "WebhookClientConfig", "WebhookClientConfigService", "WebhookFn", "WebhookServerProtocol", "AiohttpSession",
    # Registries and login
    "OperatorRegistry", "get_default_registry", "set_default_registry", "register", "ConnectionInfo", "LoginError",
    "login_via_client", "login_via_async_client", "login_via_pykube", "login_with_kubeconfig",
    "login_with_service_account",
]
