"""Kopf's lifecycles: functions that pick which of a cause's pending handlers run next.

They exist so that Kopf code that names them runs, and they pick as Kopf's do when called; but
the Bosun controller chooses by itself: in each cycle it calls every due handler of the cause
once, one at a time, in registration order (sub-handlers depth first); a handler waiting out its
retry delay does not hold up the next ones. `set_default_lifecycle()` and
`execute(lifecycle=...)` are accepted and change nothing there."""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Sequence

#: The pending handlers of a cause, in registration order.
Handlers = Sequence[Any]

log = logging.getLogger("bosun")


def all_at_once(handlers: Handlers, **_: Any) -> Handlers:
    """All pending handlers, in one go."""
    return handlers


def one_by_one(handlers: Handlers, **_: Any) -> Handlers:
    """The first pending handler."""
    return handlers[:1]


def randomized(handlers: Handlers, **_: Any) -> Handlers:
    """One pending handler, picked at random."""
    import random  # here: a handler server never needs it otherwise

    return [random.choice(handlers)] if handlers else []


def shuffled(handlers: Handlers, **_: Any) -> Handlers:
    """All pending handlers, in a random order."""
    import random

    return random.sample(list(handlers), k=len(handlers)) if handlers else []


def asap(handlers: Handlers, *, state: Any, **_: Any) -> Handlers:
    """The pending handler retried least so far (the first of those in registration order):
    one that fails does not hold up the others."""
    return sorted(handlers, key=lambda handler: state[handler.id].retries or 0)[:1]


_default: Callable[..., Handlers] = asap


def get_default_lifecycle() -> Callable[..., Handlers]:
    """The lifecycle set with `set_default_lifecycle` (Kopf's default: `asap`)."""
    return _default


def set_default_lifecycle(lifecycle: Optional[Callable[..., Handlers]]) -> None:
    """Sets the default lifecycle (None: back to `asap`); the controller keeps its own order."""
    global _default
    log.warning("The default lifecycle is already set to %s, overriding it to %s.", _default, lifecycle)
    _default = lifecycle if lifecycle is not None else asap
