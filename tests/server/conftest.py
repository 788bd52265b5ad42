"""Fixtures of the MCP-server tests: the server's tasks, a host on them, an SDK client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client
from server_support import make_tasks_dir

from evopolicy_mcp.host import Host
from evopolicy_mcp.server import build_server


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    """The small, timed, leak-scan and broken tasks of :func:`server_support.make_tasks_dir`."""
    return make_tasks_dir(tmp_path / "tasks")


@pytest.fixture
def host(tmp_path: Path, tasks_dir: Path) -> Iterator[Host]:
    h = Host(tmp_path / "data", tasks_dirs=[tasks_dir])
    yield h
    h.close()


@pytest.fixture
async def client(host: Host) -> AsyncIterator[Client]:
    async with Client(build_server(host)) as c:
        yield c
