"""Kopf's keyword arguments of a handler, and calling a handler with the ones it accepts:
sync handlers in a thread (the context goes with them), async handlers on the loop.

The object's kwargs are Kopf's read-only views (`bosun._bodies`); `patch` is Kopf's `Patch`
(`bosun._patches`), `diff` Kopf's `Diff` (`bosun._diffs`), `resource` Kopf's `Resource`
(`bosun._resources`)."""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import enum
import functools
import inspect
import threading
from typing import Any, Callable, Dict, NewType, Optional

from ._bodies import Body
# Also the names the handler server reads through this module.
from ._bodies import Annotations, Labels, Meta, Spec, Status  # noqa: F401
from ._diffs import DiffItem  # noqa: F401
from ._patches import Patch, prune  # noqa: F401

#: A handler's id (Kopf's `kopf.HandlerId`): the function's name unless `id=` is given.
HandlerId = NewType("HandlerId", str)


class Reason(str, enum.Enum):
    """Why a handler is called (Kopf's `kopf.Reason`, the `reason` kwarg): equal to
    `'create'`, `'update'`, `'delete'`, `'resume'`; Kopf's reactor also has `noop`, `free`,
    `gone`."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    RESUME = "resume"
    NOOP = "noop"
    FREE = "free"
    GONE = "gone"

    def __str__(self) -> str:
        return str(self.value)


class DaemonStoppingReason(enum.Flag):
    """Why a daemon is asked to stop (Kopf's `kopf.DaemonStoppingReason`). The controller
    does not tell the handler server why it stops a daemon: `stopped.reason` is
    `DAEMON_SIGNALLED` once stopped."""

    DONE = enum.auto()
    FILTERS_MISMATCH = enum.auto()
    RESOURCE_DELETED = enum.auto()
    OPERATOR_PAUSING = enum.auto()
    OPERATOR_EXITING = enum.auto()
    DAEMON_SIGNALLED = enum.auto()
    DAEMON_CANCELLED = enum.auto()
    DAEMON_ABANDONED = enum.auto()


class Memo(dict):
    """A free-form per-object store kept in the handler server between calls, as Kopf's
    `kopf.Memo`: a dict whose keys are also attributes."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        try:
            del self[key]
        except KeyError:
            raise AttributeError(key) from None


class DaemonStopped:
    """The `stopped` flag of a daemon. `if stopped:` / `stopped.is_set()`; in a sync daemon
    `stopped.wait(10)` sleeps up to 10 s and returns True once stopped; in an async daemon
    `await stopped.wait(10)` does the same without blocking the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._flag = threading.Event()
        self._async = asyncio.Event()
        self._reason: Optional[DaemonStoppingReason] = None

    def set(self, reason: Optional[DaemonStoppingReason] = None) -> None:
        """Marks the daemon stopped (called on the loop)."""
        reason = reason or DaemonStoppingReason.DAEMON_SIGNALLED
        self._reason = reason if self._reason is None else self._reason | reason
        self._flag.set()
        self._async.set()

    @property
    def reason(self) -> Optional[DaemonStoppingReason]:
        """Why the daemon is stopped; None while it is not."""
        return self._reason

    def is_set(self) -> bool:
        return self._flag.is_set()

    def __bool__(self) -> bool:
        return self._flag.is_set()

    def __repr__(self) -> str:
        return f"<DaemonStopped: {self.is_set()}, reason={self._reason}>"

    def wait(self, timeout: Optional[float] = None):
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return self._wait_async(timeout)
        return self._flag.wait(timeout)

    async def _wait_async(self, timeout: Optional[float]) -> bool:
        try:
            await asyncio.wait_for(self._async.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        return self.is_set()


#: Kopf's deprecated names of the `stopped` flag's types.
SyncDaemonStopperChecker = AsyncDaemonStopperChecker = DaemonStopped


def object_kwargs(body: Dict[str, Any]) -> Dict[str, Any]:
    """The kwargs every object handler gets from its body: Kopf's views into `body`, and
    its uid, name and namespace."""
    view = Body(body)
    meta = view.meta
    return {
        "body": view,
        "spec": view.spec,
        "meta": meta,
        "status": view.status,
        "uid": meta.uid,
        "name": meta.name,
        "namespace": meta.namespace,
        "labels": meta.labels,
        "annotations": meta.annotations,
    }


def timestamp(ts) -> Optional[datetime.datetime]:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return ts.ToDatetime(tzinfo=datetime.timezone.utc).replace(tzinfo=None)


@functools.lru_cache(maxsize=None)
def _accepts(fn: Callable[..., Any]) -> Optional[frozenset]:
    """The keyword names `fn` accepts, or None when it takes **kwargs (all of them)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY))


def accepted(fn: Callable[..., Any], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The kwargs `fn` accepts (all of them when it takes **kwargs)."""
    try:
        names = _accepts(fn)
    except TypeError:  # unhashable callables
        names = None
    if names is None:
        return kwargs
    return {k: v for k, v in kwargs.items() if k in names}


def is_async(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


async def invoke(fn: Callable[..., Any], kwargs: Dict[str, Any]) -> Any:
    """Calls a handler with the kwargs it accepts: an async one on the loop, a sync one in
    the operator's thread pool (Kopf's `settings.execution.executor`, sized by
    `max_workers`), with the current context, so `bosun.info` & co. work there."""
    kwargs = accepted(fn, kwargs)
    if is_async(fn):
        return await fn(**kwargs)
    from . import _settings

    executor = _settings.current().execution.executor
    if getattr(executor, "_shutdown", False):  # shut down by someone else: the loop's own pool
        executor = None
    context = contextvars.copy_context()
    result = await asyncio.get_running_loop().run_in_executor(executor, functools.partial(context.run, fn, **kwargs))
    if inspect.isawaitable(result):
        result = await result
    return result


def call_sync(fn: Callable[..., Any], kwargs: Dict[str, Any]) -> Any:
    """Calls a filter callback (`when=`, callable label filters) synchronously."""
    return fn(**accepted(fn, kwargs))
