"""Kopf's filter vocabulary: the `PRESENT`/`ABSENT` tokens of `labels=`, `annotations=`,
`value=`, `old=` and `new=`, and the combinators `all_`, `any_`, `none_`, `not_` that build one
`when=`-style callback out of several.

A combined callback is an ordinary callable taking the handler's kwargs, so the registry treats
it as any other local check (the handler server evaluates it on each call). Each inner callback
gets the kwargs it accepts, as Bosun calls every callback."""

from __future__ import annotations

import enum
from typing import Any, Callable, Collection, TypeVar

from . import _kwargs

_FnT = TypeVar("_FnT", bound=Callable[..., Any])


class MetaFilterToken(enum.Enum):
    """What a filter's key must be, whatever its value (Kopf's `MetaFilterToken`)."""

    PRESENT = enum.auto()
    ABSENT = enum.auto()

    def __repr__(self) -> str:
        return f"bosun.{self.name}"


#: A label, annotation or field filter: the key is present, whatever its value.
PRESENT = MetaFilterToken.PRESENT
#: A label, annotation or field filter: the key is absent.
ABSENT = MetaFilterToken.ABSENT


def _call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    return fn(*args, **_kwargs.accepted(fn, kwargs))


def not_(fn: _FnT) -> _FnT:
    """A callback that holds when `fn` does not (Kopf's `kopf.not_`)."""

    def not_fn(*args: Any, **kwargs: Any) -> bool:
        return not _call(fn, args, kwargs)

    return not_fn  # type: ignore[return-value]


def all_(fns: Collection[_FnT]) -> _FnT:
    """A callback that holds when every one of `fns` does (Kopf's `kopf.all_`); stops at the
    first that does not."""

    def all_fn(*args: Any, **kwargs: Any) -> bool:
        return all(_call(fn, args, kwargs) for fn in fns)

    return all_fn  # type: ignore[return-value]


def any_(fns: Collection[_FnT]) -> _FnT:
    """A callback that holds when at least one of `fns` does (Kopf's `kopf.any_`); stops at
    the first that does."""

    def any_fn(*args: Any, **kwargs: Any) -> bool:
        return any(_call(fn, args, kwargs) for fn in fns)

    return any_fn  # type: ignore[return-value]


def none_(fns: Collection[_FnT]) -> _FnT:
    """A callback that holds when none of `fns` does (Kopf's `kopf.none_`)."""

    def none_fn(*args: Any, **kwargs: Any) -> bool:
        return not any(_call(fn, args, kwargs) for fn in fns)

    return none_fn  # type: ignore[return-value]
