"""Kopf's `AiohttpSession`: what a Kopf login handler returns to give Kopf an aiohttp session
of its own. The controller makes its own connections (`bosun run --kubeconfig`, the in-cluster
account), so such a session is accepted and not used."""

from __future__ import annotations

import datetime
from typing import Any, Optional


class AiohttpSession:
    """A custom aiohttp session for Kopf's API calls, with Kopf's connection fields; not used
    by Bosun."""

    def __init__(self, *, server: str, priority: int = 0, default_namespace: Optional[str] = None,
                 expiration: Optional[datetime.datetime] = None, aiohttp_session: Any) -> None:
        self.server = server
        self.priority = priority
        self.default_namespace = default_namespace
        self.expiration = expiration
        self.aiohttp_session = aiohttp_session

    def __repr__(self) -> str:
        return f"AiohttpSession(server={self.server!r}, priority={self.priority!r})"
