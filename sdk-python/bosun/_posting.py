"""Posting Kubernetes events from handlers, as Kopf's `kopf.event`, `info`, `warn` and
`exception`: each event goes with the handler's answer and the controller posts it (as
`core/v1` Events, the message cut to 1024 characters).

Whether an event is posted follows the process's settings (`bosun._settings.current()`, the
`settings` kwarg of startup handlers), as in Kopf: nothing when `settings.posting.enabled` is
off; `info`, `warn` and `exception` only when `settings.posting.level` is at most INFO, WARNING
and ERROR; `event` whatever the level (Kopf checks no level there). Kopf's `warn` posts even
with posting disabled; here disabled means disabled, as Kopf's documentation says."""

from __future__ import annotations

import logging
import sys
from typing import Any, Dict, Iterable, Optional, Union

from . import _context, _settings
from ._bodies import build_object_reference
from ._objects import as_reference_source, walk

Backoffs = Union[float, Iterable[float], None]

log = logging.getLogger("bosun")


def _posted(level: Optional[int]) -> bool:
    posting = _settings.current().posting
    return bool(posting.enabled) and (level is None or posting.level <= level)


def _regarding(obj: Any, call: Optional[_context.Call]) -> Optional[Dict[str, str]]:
    ref = build_object_reference(as_reference_source(obj))
    if call is not None and ref.get("uid") and ref.get("uid") == (call.body.get("metadata") or {}).get("uid"):
        return None  # the handled object: the controller fills in its reference
    return {"api_version": ref.get("apiVersion", ""), "kind": ref.get("kind", ""), "namespace": ref.get("namespace") or "",
            "name": ref.get("name", ""), "uid": ref.get("uid", "")}


def _post(objs: Any, type: str, reason: str, message: str, level: Optional[int]) -> None:
    if not _posted(level):
        return
    call = _context.current.get()
    if call is None:
        log.warning("An event outside a handler call is not posted: %s %s %s", type, reason, message)
        return
    for obj in walk(objs):
        call.emit("event", {"type": type, "reason": reason, "message": str(message)[:1024],
                            "regarding": _regarding(obj, call)})


def event(objs: Any, *, type: str, reason: str, message: str = "", backoffs: Backoffs = None) -> None:
    """Posts an event of any `type` about each object (Kopf's `kopf.event`). `backoffs` is
    accepted: the controller retries failed posts its own way."""
    _post(objs, type, reason, message, None)


def info(objs: Any, *, reason: str, message: str = "", backoffs: Backoffs = None) -> None:
    """Posts a `Normal` event about each object (Kopf's `kopf.info`)."""
    _post(objs, "Normal", reason, message, logging.INFO)


def warn(objs: Any, *, reason: str, message: str = "", backoffs: Backoffs = None) -> None:
    """Posts a `Warning` event about each object (Kopf's `kopf.warn`)."""
    _post(objs, "Warning", reason, message, logging.WARNING)


def exception(objs: Any, *, reason: str = "", message: str = "", exc: Optional[BaseException] = None,
              backoffs: Backoffs = None) -> None:
    """Posts an `Error` event about each object (Kopf's `kopf.exception`): the reason defaults
    to the exception's class name, the message is `message` then the exception's text; the
    exception defaults to the one being handled."""
    if exc is None:
        exc = sys.exc_info()[1]
    reason = reason or type(exc).__name__
    text = f"{message} {exc}" if message and exc else f"{exc}" if exc else message
    _post(objs, "Error", reason, text, logging.ERROR)
