"""Kopf's handler errors. Anything else a handler raises is an unexpected error: the handler's
`errors` mode decides what it means, and its traceback travels in the message."""

from __future__ import annotations

import enum
from typing import Optional


class ErrorsMode(enum.Enum):
    """What an unexpected error of a handler means (Kopf's `kopf.ErrorsMode`)."""

    TEMPORARY = "temporary"  # retried after the backoff (the default)
    PERMANENT = "permanent"  # not retried
    IGNORED = "ignored"  # logged; the handler counts as succeeded


class HandlerError(Exception):
    """Base of the errors a handler raises on purpose."""


class TemporaryError(HandlerError):
    """Retry the handler after `delay` seconds (Kopf's default: 60)."""

    def __init__(self, message: str = "", delay: Optional[float] = 60):
        super().__init__(message)
        self.delay = delay


class PermanentError(HandlerError):
    """Fail the handler for good: it is not retried for this cause."""


class HandlerTimeoutError(PermanentError):
    """The handler ran out of its `timeout` (Kopf's `kopf.HandlerTimeoutError`): the
    controller decides it, the handler's outcome says so; raising it fails the handler for good."""


class HandlerRetriesError(PermanentError):
    """The handler ran out of its `retries` (Kopf's `kopf.HandlerRetriesError`): the
    controller decides it, the handler's outcome says so; raising it fails the handler for good."""


class AdmissionError(PermanentError):
    """Deny an admission request from a validating or mutating handler."""

    def __init__(self, message: str = "", code: Optional[int] = 500):
        super().__init__(message)
        self.code = code
