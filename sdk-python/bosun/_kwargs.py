"""Kopf's keyword arguments of a handler, and calling a handler with the ones it accepts:
sync handlers in a thread (the context goes with them), async handlers on the loop.

The object's kwargs are Kopf's read-only views (`bosun._bodies`); `patch` is Kopf's `Patch`
(`bosun._patches`), `diff` Kopf's `Diff` (`bosun._diffs`), `resource` Kopf's `Resource`
(`bosun._resources`)."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import datetime
import enum
import functools
import inspect
import threading
from typing import Any, Callable, Dict, NewType, Optional, Tuple

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
    raw = body.get("metadata") if type(body) is dict else None
    raw = raw if type(raw) is dict else meta  # what the view reads, without its lookups
    return {
        "body": view,
        "spec": view.spec,
        "meta": meta,
        "status": view.status,
        "uid": raw.get("uid"),
        "name": raw.get("name"),
        "namespace": raw.get("namespace"),
        "labels": meta.labels,
        "annotations": meta.annotations,
    }


_EPOCH = datetime.datetime(1970, 1, 1)


def timestamp(ts) -> Optional[datetime.datetime]:
    """A protobuf Timestamp as a naive UTC datetime (Kopf's `started`); None when unset."""
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    try:
        return _EPOCH + datetime.timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)
    except OverflowError:  # beyond datetime's years 1-9999: as protobuf's own conversion fails
        return ts.ToDatetime(tzinfo=datetime.timezone.utc).replace(tzinfo=None)


def duration(d) -> datetime.timedelta:
    """A protobuf Duration as a timedelta (Kopf's `runtime`)."""
    try:
        micros = abs(d.nanos) // 1000  # toward zero, as protobuf's ToTimedelta
        return datetime.timedelta(seconds=d.seconds, microseconds=-micros if d.nanos < 0 else micros)
    except OverflowError:
        return d.ToTimedelta()


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
    try:
        return _is_async(fn)
    except TypeError:  # unhashable callables
        return _is_async.__wrapped__(fn)


@functools.lru_cache(maxsize=None)
def _is_async(fn: Callable[..., Any]) -> bool:
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
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    finished = _finished(loop)

    def run() -> None:
        try:
            value = context.run(fn, **kwargs)
        except BaseException as e:
            finished.put(future, False, e)
        else:
            finished.put(future, True, value)

    if not submit(executor, run, lambda: finished.put(future, None, None)):
        future = loop.run_in_executor(executor, functools.partial(context.run, fn, **kwargs))
    result = await future
    if inspect.isawaitable(result):
        result = await result
    return result


class _Finished:
    """Results of sync handlers on their way back to one loop: the threads queue them, and the
    loop is woken once for all that finish while it has not run yet (`run_in_executor` wakes it
    once per call, and makes two futures per call)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.items: "collections.deque[Tuple[asyncio.Future, Optional[bool], Any]]" = collections.deque()
        self.scheduled = False

    def put(self, future: asyncio.Future, ok: Optional[bool], value: Any) -> None:
        """From any thread: `ok` True (a result), False (an exception), None (cancelled)."""
        self.items.append((future, ok, value))
        if not self.scheduled:
            self.scheduled = True
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    def drain(self) -> None:
        self.scheduled = False
        while self.items:
            future, ok, value = self.items.popleft()
            if future.done():
                continue
            if ok is None:
                future.cancel()
            elif ok:
                future.set_result(value)
            else:
                if isinstance(value, StopIteration):  # a future refuses it (as a coroutine would)
                    value = RuntimeError(f"the handler raised {value!r}")
                future.set_exception(value)


class _Job:
    """A work item of a `ThreadPoolExecutor` (what its workers run: `run()`, and
    `future.cancel()` when the pool is shut down with its queue cancelled)."""

    __slots__ = ("run_job", "cancel_job")

    def __init__(self, run: Callable[[], None], cancel: Callable[[], None]) -> None:
        self.run_job, self.cancel_job = run, cancel

    def run(self, *_: Any) -> None:
        self.run_job()

    @property
    def future(self) -> "_Job":
        return self

    def cancel(self) -> bool:
        self.cancel_job()
        return True


_FINISHED: Dict[int, _Finished] = {}


def _finished(loop: asyncio.AbstractEventLoop) -> _Finished:
    finished = _FINISHED.get(id(loop))
    if finished is None or finished.loop is not loop:
        if len(_FINISHED) > 64:
            _FINISHED.clear()
        finished = _FINISHED[id(loop)] = _Finished(loop)
    return finished


def submit(executor: Any, run: Callable[[], None], cancel: Callable[[], None]) -> bool:
    """Queues `run` in `executor` as its `submit()` would, without its per-call Future (`cancel`
    runs instead if the pool drops it at shutdown); False for any executor but an open
    `ThreadPoolExecutor` (then the caller takes the executor's own way). It reads the pool's
    internals, the same from Python 3.8 to 3.14; a pool without them is not used this way."""
    if type(executor) is not concurrent.futures.ThreadPoolExecutor:
        return False
    queue, lock, adjust = (getattr(executor, name, None) for name in ("_work_queue", "_shutdown_lock", "_adjust_thread_count"))
    if queue is None or lock is None or adjust is None:
        return False
    with lock:
        if getattr(executor, "_broken", False) or getattr(executor, "_shutdown", True):
            return False
        queue.put(_Job(run, cancel))
        adjust()
    return True


def call_sync(fn: Callable[..., Any], kwargs: Dict[str, Any]) -> Any:
    """Calls a filter callback (`when=`, callable label filters) synchronously."""
    return fn(**accepted(fn, kwargs))
