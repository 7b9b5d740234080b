"""Kopf's `diff` kwarg: the changes between the last handled and the current object, as the
controller computed them, in Kopf's shapes: a `Diff` (a sequence) of `DiffItem`s, each
`(operation, field, old, new)` with `field` a tuple of keys, also unpackable as a 4-tuple and
equal to any sequence of the same four values."""

from __future__ import annotations

import enum
from typing import Any, Iterable, Iterator, NamedTuple, Optional, Sequence, Tuple, Union, overload

from ._bodies import FieldPath


def _equal_as_sequences(self: Any, other: object) -> bool:
    """Kopf's diffs compare equal to any sequence of the same items (a NamedTuple takes no
    mixin, so both classes share these two functions)."""
    if isinstance(other, Sequence) and not isinstance(other, str):
        return tuple(self) == tuple(other)
    return NotImplemented


def _unequal_as_sequences(self: Any, other: object) -> bool:
    equal = _equal_as_sequences(self, other)
    return equal if equal is NotImplemented else not equal


class DiffOperation(str, enum.Enum):
    """What happened to a field (Kopf's `kopf.DiffOperation`): equal to `'add'`, `'change'`,
    `'remove'`."""

    ADD = "add"
    CHANGE = "change"
    REMOVE = "remove"

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


class DiffItem(NamedTuple):
    """One change (Kopf's `kopf.DiffItem`); `old` is None for an addition, `new` for a
    removal."""

    operation: DiffOperation
    field: FieldPath
    old: Any
    new: Any

    def __repr__(self) -> str:
        return repr(tuple(self))

    __eq__ = _equal_as_sequences
    __ne__ = _unequal_as_sequences

    def __hash__(self) -> int:
        return hash(tuple(self))

    @property
    def op(self) -> DiffOperation:
        return self.operation


class Diff(Sequence[DiffItem]):
    """All changes (Kopf's `kopf.Diff`): an immutable sequence of `DiffItem`s, equal to any
    sequence of the same items."""

    def __init__(self, __items: Iterable[Any]) -> None:
        self._items: Tuple[DiffItem, ...] = tuple(DiffItem(*item) for item in __items)

    @overload
    def __getitem__(self, index: int) -> DiffItem: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[DiffItem]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[DiffItem, Sequence[DiffItem]]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[DiffItem]:
        return iter(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return repr(self._items)

    __eq__ = _equal_as_sequences
    __ne__ = _unequal_as_sequences


class WireDiff(Diff):
    """A `Diff` as it came from the controller (the contract's DiffItems), decoded on first use:
    most handlers never look at their `diff`."""

    def __init__(self, wire: Any, decode: Any) -> None:  # noqa: super().__init__ is the decoding
        self._wire = wire
        self._decode = decode
        self._decoded: Optional[Tuple[DiffItem, ...]] = None

    @property  # type: ignore[override]
    def _items(self) -> Tuple[DiffItem, ...]:
        if self._decoded is None:
            self._decoded = tuple(DiffItem(*self._decode(item)) for item in self._wire)
            self._wire = ()
        return self._decoded
