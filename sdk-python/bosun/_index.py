"""In-memory indices, Kopf's `@kopf.index`: what each index handler returned for each object,
kept in this handler server and passed to every handler as a kwarg named after the index.

The controller sends an index handler every watch event of the objects that match its filters
(the first listing included) and calls no other handler before that listing is indexed; an
object that is deleted or stops matching comes as a `DELETED` event and leaves the index.

As in Kopf: a returned `dict` (exactly `dict`) puts each value under its key; `None` keeps what
the object had; anything else goes under the key `None`. Failures: an ignored error (the
default mode for indices) keeps the stale values; `PermanentError` or a permanent mode drops the
object's values and leaves the object out for good; `TemporaryError` or a temporary mode drops
them and leaves the object out for the error's delay (or the backoff), for good once the
handler's retries or timeout run out. A deletion forgets all that."""

from __future__ import annotations

import time
from typing import Any, Dict, Generic, Hashable, Iterator, List, Mapping, Optional, Tuple, TypeVar

from ._errors import ErrorsMode, PermanentError, TemporaryError


_K = TypeVar("_K")
_V = TypeVar("_V")


class Store(Generic[_V]):
    """The values that objects put under one key of an index (Kopf's `kopf.Store`): a
    read-only collection, never empty."""

    __slots__ = ("_values",)

    def __init__(self, values: Dict[str, Any]):
        self._values = values

    def __iter__(self) -> Iterator[_V]:
        return iter(list(self._values.values()))

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, value: object) -> bool:
        return any(v == value for v in list(self._values.values()))

    def __repr__(self) -> str:
        return repr(list(self._values.values()))


class Index(Mapping[_K, Store[_V]]):
    """One index (Kopf's `kopf.Index`): a read-only mapping of keys to the [`Store`] of values
    the objects put there."""

    def __init__(self) -> None:
        self._by_key: Dict[Hashable, Dict[str, Any]] = {}
        self._by_object: Dict[str, List[Hashable]] = {}
        # object → (failures in a row, first failure, excluded until: None for good)
        self._failures: Dict[str, Tuple[int, float, Optional[float]]] = {}

    def __getitem__(self, key: Hashable) -> Store[_V]:
        return Store(self._by_key[key])

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._by_key))

    def __len__(self) -> int:
        return len(self._by_key)

    def __repr__(self) -> str:
        return repr({k: list(v.values()) for k, v in list(self._by_key.items())})

    # ---- what the server does with it ---------------------------------------------------

    def _remove(self, obj: str) -> None:
        for key in self._by_object.pop(obj, ()):
            values = self._by_key.get(key)
            if values is not None:
                values.pop(obj, None)
                if not values:
                    del self._by_key[key]

    def replace(self, obj: str, result: Any) -> None:
        """Puts what the handler returned for the object in place of what it had."""
        self._failures.pop(obj, None)
        if result is None:
            return
        entries = result.items() if type(result) is dict else [(None, result)]
        self._remove(obj)
        keys = []
        for key, value in entries:
            self._by_key.setdefault(key, {})[obj] = value
            keys.append(key)
        if keys:
            self._by_object[obj] = keys

    def forget(self, obj: str) -> None:
        """The object is deleted or no longer matches: drops it and its failures."""
        self._remove(obj)
        self._failures.pop(obj, None)

    def excluded(self, obj: str, now: Optional[float] = None) -> bool:
        """Whether the object is left out after failures."""
        failure = self._failures.get(obj)
        if failure is None:
            return False
        until = failure[2]
        return until is None or (now if now is not None else time.monotonic()) < until

    def failed(self, obj: str, exc: BaseException, *, errors: Optional[ErrorsMode], backoff: Optional[float],
               retries: Optional[int], timeout: Optional[float], now: Optional[float] = None) -> None:
        """Applies Kopf's rules for a failure of the index handler on the object."""
        now = now if now is not None else time.monotonic()
        if isinstance(exc, PermanentError):
            delay: Optional[float] = None
        elif isinstance(exc, TemporaryError):
            delay = exc.delay if exc.delay is not None else (backoff if backoff is not None else 60.0)
        elif (errors or ErrorsMode.IGNORED) is ErrorsMode.IGNORED:
            return  # the stale values stay
        elif errors is ErrorsMode.PERMANENT:
            delay = None
        else:
            delay = backoff if backoff is not None else 60.0
        self._remove(obj)
        count, first, _ = self._failures.get(obj, (0, now, None))
        count += 1
        out_of_tries = (retries is not None and count >= retries) or (timeout is not None and now - first >= timeout)
        until = None if delay is None or out_of_tries else now + float(delay or 0)
        self._failures[obj] = (count, first, until)


def object_key(body: Mapping[str, Any]) -> str:
    """What an index keeps an object's values under: its uid, else `namespace/name`."""
    meta = body.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
