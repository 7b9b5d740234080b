"""Kopf's keyword arguments of a handler, and calling a handler with the ones it accepts:
sync handlers in a thread (the context goes with them), async handlers on the loop."""

from __future__ import annotations

import asyncio
import datetime
import functools
import inspect
import threading
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple


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


class Patch(dict):
    """The `patch` argument: a dict that handlers fill; it is sent as one JSON merge patch
    (`None` deletes a key). `patch.spec`, `patch.status` and `patch.meta` (also
    `patch.metadata`) give the sections, created on first use; `patch.meta.labels` and
    `patch.meta.annotations` too."""

    def _section(self, key: str) -> "Patch":
        value = self.get(key)
        if not isinstance(value, Patch):
            value = Patch(value or {})
            self[key] = value
        return value

    @property
    def spec(self) -> "Patch":
        return self._section("spec")

    @property
    def status(self) -> "Patch":
        return self._section("status")

    @property
    def metadata(self) -> "Patch":
        return self._section("metadata")

    meta = metadata

    @property
    def labels(self) -> "Patch":
        return self._section("labels")

    @property
    def annotations(self) -> "Patch":
        return self._section("annotations")


def prune(patch: Any) -> Any:
    """The patch without empty sections (left by `patch.status` merely looked at): an empty
    object merges as nothing anyway."""
    if isinstance(patch, dict):
        out = {}
        for key, value in patch.items():
            value = prune(value)
            if isinstance(value, dict) and not value and value is not None:
                continue
            out[key] = value
        return out
    return patch


class DiffItem(NamedTuple):
    """One change, as Kopf's: `(operation, field, old, new)` with `operation` one of
    `add`, `change`, `remove` and `field` a tuple of keys."""

    operation: str
    field: Tuple[str, ...]
    old: Any
    new: Any


class DaemonStopped:
    """The `stopped` flag of a daemon. `if stopped:` / `stopped.is_set()`; in a sync daemon
    `stopped.wait(10)` sleeps up to 10 s and returns True once stopped; in an async daemon
    `await stopped.wait(10)` does the same without blocking the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._flag = threading.Event()
        self._async = asyncio.Event()

    def set(self) -> None:
        """Marks the daemon stopped (called on the loop)."""
        self._flag.set()
        self._async.set()

    def is_set(self) -> bool:
        return self._flag.is_set()

    def __bool__(self) -> bool:
        return self._flag.is_set()

    def __repr__(self) -> str:
        return f"<DaemonStopped: {self.is_set()}>"

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


#: Kopf's type hints of the object kwargs (`kopf.Body`, `kopf.Spec`…): plain dicts here.
Body = Spec = Status = Meta = Dict[str, Any]
Labels = Annotations = Dict[str, str]


def object_kwargs(body: Dict[str, Any]) -> Dict[str, Any]:
    """The kwargs every object handler gets from its body."""
    meta = body.get("metadata") or {}
    return {
        "body": body,
        "spec": body.get("spec") or {},
        "meta": meta,
        "status": body.get("status") or {},
        "uid": meta.get("uid"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
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


def _accepted(fn: Callable[..., Any], kwargs: Dict[str, Any]) -> Dict[str, Any]:
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
    the default thread pool (with the current context, so `bosun.info` & co. work there)."""
    kwargs = _accepted(fn, kwargs)
    if is_async(fn):
        return await fn(**kwargs)
    result = await asyncio.to_thread(fn, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def call_sync(fn: Callable[..., Any], kwargs: Dict[str, Any]) -> Any:
    """Calls a filter callback (`when=`, callable label filters) synchronously."""
    return fn(**_accepted(fn, kwargs))
