"""What one call of a handler collects for its answer: log lines, events, owned objects,
declared sub-handlers. The current call is a context variable, so `bosun.info(...)`,
`bosun.own(...)` and `@bosun.subhandler` reach it from the handler's code (also from a
sync handler's thread: `asyncio.to_thread` copies the context)."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple


class Call:
    """One handler call. `emit` sends a message of the contract (a LogLine, an Event, an
    OwnedObject) to wherever this call's answer goes."""

    def __init__(self, body: Dict[str, Any], emit: Callable[[str, Any], None], kwargs: Optional[Dict[str, Any]] = None,
                 finished: Iterable[str] = (), rebuilding: bool = False):
        self.body = body
        self.emit = emit
        #: The handler's kwargs (for the filters of the sub-handlers it declares).
        self.kwargs: Dict[str, Any] = kwargs if kwargs is not None else {}
        #: Sub-handlers declared during this call, in order: id → (fn, options).
        self.subhandlers: Dict[str, "SubhandlerDecl"] = {}
        #: The sub-handlers the controller says are finished: `execute()` returns once every
        #: declared one is among them.
        self.finished: Set[str] = set(finished)
        #: The parent is only re-entered for its sub-handlers' closures: `execute()` ends it.
        self.rebuilding = rebuilding
        #: `execute()` was called (else it runs when the handler returns, as in Kopf).
        self.executed = False

    def matches(self, **filters: Any) -> bool:
        """Whether Kopf's filters of a sub-handler hold for this call."""
        from ._matching import matches

        return matches(self.kwargs, self.body, **filters)


class SubhandlerDecl:
    def __init__(self, id: str, fn: Callable[..., Any], options: Dict[str, Any], param: Any):
        self.id = id
        self.fn = fn
        self.options = options
        self.param = param


current: contextvars.ContextVar[Optional[Call]] = contextvars.ContextVar("bosun_call", default=None)


@contextlib.contextmanager
def calling(body: Dict[str, Any], emit: Callable[[str, Any], None], **options: Any) -> Iterator[Call]:
    """The handler call in progress while the block runs (what `bosun.info`, `own`,
    `subhandler`… act on), also in the threads sync handlers run in; `options` are `Call`'s
    other arguments."""
    call = Call(body, emit, **options)
    token = current.set(call)
    try:
        yield call
    finally:
        current.reset(token)


def require(what: str) -> Call:
    call = current.get()
    if call is None:
        raise RuntimeError(f"{what} works only inside a handler call")
    return call


_LEVELS: Tuple[Tuple[int, str], ...] = (
    (logging.ERROR, "LEVEL_ERROR"),
    (logging.WARNING, "LEVEL_WARNING"),
    (logging.INFO, "LEVEL_INFO"),
    (0, "LEVEL_DEBUG"),
)


class _ToCall(logging.Handler):
    """Sends each record of a call's logger to that call's answer as a LogLine (the record
    carries where to, `bosun_send`)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            send = getattr(record, "bosun_send", None)
            if send is None:
                return
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            level = next(name for floor, name in _LEVELS if record.levelno >= floor)
            send(level, message)
        except Exception:  # a logger must never break the handler
            self.handleError(record)


#: The one logger behind every call's `logger` kwarg: its lines travel to the controller's log,
#: which prefixes them with `[namespace/name]`; it does not propagate (no second copy in the
#: server's own output).
_CALLS = logging.Logger("bosun.calls", logging.DEBUG)
_CALLS.propagate = False
_CALLS.addHandler(_ToCall())


class CallLogger(logging.LoggerAdapter):
    """The `logger` kwarg of one call (as Kopf's is an adapter, `kopf.ObjectLogger`): made per
    call for the cost of one small object; its lines go to the call's answer."""

    def __init__(self, name: str, send: Callable[[str, str], None]) -> None:
        super().__init__(_CALLS, {"bosun_send": send})
        self._name = name

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._name

    def process(self, msg: Any, kwargs: Any) -> Tuple[Any, Any]:
        kwargs["extra"] = {**(kwargs.get("extra") or {}), **self.extra}  # type: ignore[dict-item]
        return msg, kwargs


def object_logger(namespace: Optional[str], name: Optional[str], send: Callable[[str, str], None]) -> CallLogger:
    """The `logger` of a call about one object: its lines travel to the controller's log."""
    return CallLogger(f"bosun.objects.{namespace or ''}/{name or ''}", send)
