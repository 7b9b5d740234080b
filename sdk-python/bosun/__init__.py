"""Bosun's Python SDK: Kopf's API for handlers that the Bosun controller calls over gRPC.

    import bosun

    @bosun.on.create('kopfexamples')
    def create_fn(spec, logger, **kwargs):
        logger.info(f"And here we are! Creating: {spec}")
        return {'message': 'hello world'}

Run it with the controller: `bosun dev handlers.py` (embedded dev cluster) or
`bosun run handlers.py -A` (the cluster of your kubeconfig). `python -m bosun handlers.py`
serves the handlers alone, where `BOSUN_LISTEN` says (`host:port` or `unix:///path`).
"""

from . import on
from ._errors import AdmissionError, ErrorsMode, HandlerError, PermanentError, TemporaryError
from ._bodies import build_object_reference, build_owner_reference
from ._helpers import (adjust_namespace, adopt, append_owner_reference, harmonize_naming, label, own,
                       remove_owner_reference)
from ._posting import event, exception, info, warn
from ._bodies import (Annotations, Body, BodyEssence, FieldPath, FieldSpec, Labels, Meta, ObjectReference,
                      OwnerReference, RawBody, RawEvent, RawEventType, Spec, Status)
from ._diffs import Diff, DiffItem, DiffOperation
from ._index import Index, Store
from ._kwargs import DaemonStopped, DaemonStoppingReason, HandlerId, Memo, Reason
from ._patches import Patch, PatchFn
from ._resources import EVERYTHING, Resource
from ._filters import ABSENT, PRESENT, all_, any_, none_, not_
from ._registry import Registry, default_registry, owns
from ._embedded import configure, operator, run
from ._reviews import (Headers, Operation, SSLPeer, UserInfo, WebhookClientConfig, WebhookClientConfigService,
                       WebhookFn, WebhookServerProtocol)
from ._server import serve, serve_forever
from ._settings import OperatorSettings
from ._storages import (AnnotationsDiffBaseStorage, AnnotationsProgressStorage, DiffBaseStorage, MultiDiffBaseStorage,
                        MultiProgressStorage, ProgressRecord, ProgressStorage, SmartProgressStorage,
                        StatusDiffBaseStorage, StatusProgressStorage)
from ._webhooks import (WebhookAutoServer, WebhookAutoTunnel, WebhookDockerDesktopServer, WebhookK3dServer,
                        WebhookMinikubeServer, WebhookNgrokTunnel, WebhookServer)
from ._subhandlers import execute, subhandler
from .on import daemon, index, timer


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
    "on", "timer", "daemon", "index", "Index", "Store", "subhandler", "execute",
    "Body", "Spec", "Status", "Meta", "Labels", "Annotations", "BodyEssence", "FieldPath", "FieldSpec",
    "ObjectReference", "OwnerReference", "RawBody", "RawEvent", "RawEventType", "Diff", "DiffOperation",
    "DaemonStoppingReason", "HandlerId", "Reason", "PatchFn", "EVERYTHING", "Resource",
    "TemporaryError", "PermanentError", "AdmissionError", "HandlerError", "ErrorsMode",
    "PRESENT", "ABSENT", "all_", "any_", "none_", "not_", "Memo", "Patch", "DiffItem", "DaemonStopped", "Registry", "default_registry",
    "adopt", "label", "harmonize_naming", "append_owner_reference", "remove_owner_reference", "adjust_namespace",
    "OperatorSettings", "ProgressRecord", "ProgressStorage", "AnnotationsProgressStorage", "StatusProgressStorage",
    "MultiProgressStorage", "SmartProgressStorage", "DiffBaseStorage", "AnnotationsDiffBaseStorage",
    "StatusDiffBaseStorage", "MultiDiffBaseStorage", "WebhookServer", "WebhookAutoServer", "WebhookAutoTunnel",
    "WebhookK3dServer", "WebhookMinikubeServer", "WebhookDockerDesktopServer", "WebhookNgrokTunnel",
    "WebhookClientConfig", "WebhookClientConfigService", "WebhookFn", "WebhookServerProtocol", "UserInfo", "Headers",
    "SSLPeer", "Operation", "own", "owns", "info", "warn", "exception", "event",
    "build_object_reference", "build_owner_reference", "serve", "serve_forever", "operator", "run", "configure",
]
