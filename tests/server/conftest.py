"""Fixtures of the MCP-server tests: an SDK client on the shared host."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.server.app import build_server


@pytest.fixture
async def client(host: Host) -> AsyncIterator[Client]:
    async with Client(build_server(host)) as c:
        yield c
