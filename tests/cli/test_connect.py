"""`evopolicy-mcp connect URL`: the stdio proxy to a run's HTTP server, as Kimi Code's
config starts it. It forwards calls and progress both ways, and reaches nothing
without the run's token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from evopolicy_mcp.agents.client import transport
from evopolicy_mcp.agents.config import TOKEN_VARIABLE, Remote, proxy_launch
from evopolicy_mcp.agents.endpoint import RunServer
from tests.support.server import MINI, PD_FILES


@pytest.fixture
def server(tmp_path: Path, tasks_dir: Path) -> Iterator[tuple[Remote, Path]]:
    run = RunServer(tmp_path / "data", tasks_dirs=(tasks_dir,))
    remote = run.bind()
    run.start(tmp_path)
    try:
        yield remote, tmp_path
    finally:
        run.stop()


def test_the_proxy_forwards_calls_and_progress(server: tuple[Remote, Path]) -> None:
    remote, workdir = server
    progress: list[float] = []

    async def go() -> dict[str, object]:
        env = {"PATH": os.environ["PATH"]}
        async with Client(transport(proxy_launch(remote), env)) as client:
            run = (await client.call_tool("start_run", {"task_id": MINI})).structured_content
            assert run is not None

            async def note(done: float, total: float | None, message: str | None) -> None:
                progress.append(done)

            result = await client.call_tool(
                "submit_policy",
                {"run_id": run["run_id"], "episodes": "0:4", "files": PD_FILES},
                progress_callback=note,
            )
            assert result.structured_content is not None
            return result.structured_content

    view = anyio.run(go)
    assert view["status"] == "complete" and view["indices_total"] == 4
    assert progress and progress[-1] == 4


def test_the_proxy_without_the_token_reaches_nothing(server: tuple[Remote, Path]) -> None:
    remote, _ = server
    initialize = (
        '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {'
        '"protocolVersion": "2025-06-18", "capabilities": {}, '
        '"clientInfo": {"name": "t", "version": "0"}}}\n'
    )
    for token in (remote.token, "", "not-the-token"):
        proc = subprocess.Popen(
            [sys.executable, "-m", "evopolicy_mcp", "connect", remote.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, TOKEN_VARIABLE: token},
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(initialize)
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        proc.stdin.close()
        assert proc.wait(60) == 0
        if token == remote.token:  # the check can fail: with the token it is answered
            assert answer["result"]["serverInfo"]["name"] == "evopolicy"
        else:
            assert "result" not in answer and answer["error"]["code"] < 0
