"""Kopf's logging names: `kopf.Logger` (the type of the `logger` kwarg), `LogFormat` (the
`--log-format` choices), and `ObjectLogger`/`LocalObjectLogger`, loggers about one object that
users may build themselves (for threads of their own).

The `logger` kwarg of handlers is the handler server's own (`bosun._context.object_logger`): its
lines travel to the controller's log. An `ObjectLogger` built by hand logs in this process,
through the `bosun.objects` logger, each line prefixed with `[namespace/name]`; neither kind is
posted as events from here (the controller posts log lines with `settings.posting.loggers`)."""

from __future__ import annotations

import enum
import logging
from typing import Any, Mapping, MutableMapping, Tuple, Union

#: The `logger` kwarg's type: a logger or a logger adapter (Kopf's `kopf.Logger`).
Logger = Union[logging.Logger, logging.LoggerAdapter]


class LogFormat(enum.Enum):
    """How log lines look (Kopf's `kopf.LogFormat`; the controller's `--log-format`)."""

    PLAIN = "%(message)s"
    FULL = "[%(asctime)s] %(name)-20.20s [%(levelname)-8.8s] %(message)s"
    JSON = "-json-"


class ObjectLogger(logging.LoggerAdapter):
    """A logger about one object (Kopf's `kopf.ObjectLogger`): lines go to the `bosun.objects`
    logger, prefixed with `[namespace/name]`, with the object's reference as `k8s_ref`."""

    def __init__(self, *, body: Mapping[str, Any], settings: Any) -> None:
        meta = body.get("metadata") or {}
        ref = {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "name": meta.get("name"),
               "uid": meta.get("uid"), "namespace": meta.get("namespace")}
        super().__init__(logging.getLogger("bosun.objects"), {"settings": settings, "k8s_skip": False, "k8s_ref": ref})

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> Tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        ref = (self.extra or {}).get("k8s_ref") or {}
        prefix = f"[{ref.get('namespace')}/{ref.get('name')}]" if ref.get("namespace") else f"[{ref.get('name')}]"
        return f"{prefix} {msg}", kwargs


class LocalObjectLogger(ObjectLogger):
    """The same, marked as never to be posted as events (Kopf's `kopf.LocalObjectLogger`)."""

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["extra"] = {**(kwargs.get("extra") or {}), "k8s_skip": True}
        super().log(level, msg, *args, **kwargs)
