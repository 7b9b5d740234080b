"""Fixtures for the SDK's tests: a registry and real handler servers (sdk_support.Server)."""

from __future__ import annotations

import pytest

import bosun
from sdk_support import Server


@pytest.fixture
def registry():
    return bosun.Registry()


@pytest.fixture
def serve():
    servers = []

    def start(registry):
        server = Server(registry).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()
