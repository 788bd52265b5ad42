"""Streamable HTTP: a real server subprocess on 127.0.0.1, and the bearer-token gate."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from evopolicy_mcp.server.http_auth import BearerTokenGate, is_loopback, resolve_token
from tests.support.server import MINI, PD_FILES, call, call_error, write_task

TOKEN = "test-token-7f3a"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[str], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited: {proc.stderr.read() if proc.stderr else ''}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the HTTP server did not start listening")


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str, Path]:
    tasks_dir, data_dir = tmp_path / "tasks", tmp_path / "data"
    write_task(tasks_dir)
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evopolicy_mcp",
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            "--tasks-dir",
            str(tasks_dir),
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "EVOPOLICY_TOKEN"},
    )
    _wait_listening(port, proc)
    return proc, f"http://127.0.0.1:{port}/mcp", data_dir


@pytest.fixture
def stop() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _runs(data_dir: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "runs", "--json", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(out.stdout))


@pytest.mark.anyio
async def test_streamable_http_on_loopback_serves_the_tools(tmp_path: Path, stop: list) -> None:
    proc, url, _ = _start(tmp_path)
    stop.append(proc)
    async with Client(url) as client:
        run = await call(client, "start_run", task_id=MINI)
        view = await call(
            client, "submit_policy", run_id=run["run_id"], episodes="0:2", files=PD_FILES
        )
        assert (view["status"], view["score"]) == ("complete", 500.0), view


@pytest.mark.anyio
async def test_a_request_without_the_token_gets_401_and_changes_nothing(
    tmp_path: Path, stop: list
) -> None:
    proc, url, data_dir = _start(tmp_path, "--token", TOKEN, "--max-runs", "1")
    stop.append(proc)
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "start_run", "arguments": {"task_id": MINI}},
    }
    headers = {"accept": "application/json, text/event-stream"}
    for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}):
        response = httpx2.post(url, json=request, headers=headers | auth, timeout=10)
        assert response.status_code == 401, auth
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "--token" in response.json()["error_description"]

    with pytest.raises(BaseException):  # noqa: B017 - the transport raises a group
        async with Client(url) as client:
            await client.list_tools()
    assert _runs(data_dir) == []

    authorized = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"})
    async with Client(streamable_http_client(url, http_client=authorized)) as client:
        run = await call(client, "start_run", task_id=MINI)  # the one run is still free
    assert [r["run_id"] for r in _runs(data_dir)] == [run["run_id"]]


def test_only_loopback_addresses_count_as_loopback() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.org", ""):
        assert not is_loopback(host), host


def test_a_token_is_required_beyond_loopback_and_whenever_one_is_given() -> None:
    assert resolve_token("127.0.0.1", None) == (None, False)
    assert resolve_token("127.0.0.1", "mine") == ("mine", False)
    assert resolve_token("0.0.0.0", "mine") == ("mine", False)
    token, generated = resolve_token("0.0.0.0", None)
    assert generated and token and len(token) >= 32
    assert resolve_token("0.0.0.0", None)[0] != token


@pytest.mark.anyio
async def test_the_gate_passes_only_requests_with_the_token() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

    gate = BearerTokenGate(app, TOKEN)

    async def status(headers: list[tuple[bytes, bytes]]) -> int:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await gate({"type": "http", "headers": headers}, receive, send)
        return int(sent[0]["status"])

    good = (b"authorization", f"Bearer {TOKEN}".encode())
    assert await status([]) == 401
    assert await status([(b"authorization", b"Bearer nope")]) == 401
    assert await status([good, good]) == 401  # ambiguous: refused
    assert reached == []
    assert await status([good]) == 200
    assert await status([(b"Authorization", f"Bearer {TOKEN}".encode())]) == 200
    assert reached == ["http", "http"]

    async def no_receive() -> dict[str, Any]:
        return {"type": "lifespan.startup"}

    async def no_send(message: dict[str, Any]) -> None:
        return None

    await gate({"type": "lifespan"}, no_receive, no_send)  # start-up is not a request
    assert reached[-1] == "lifespan"


def _with_token(url: str, token: str) -> Any:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})
    return streamable_http_client(url, http_client=http)


@pytest.mark.anyio
async def test_another_client_cannot_see_or_finalize_a_run(tmp_path: Path, stop: list) -> None:
    proc, url, data_dir = _start(tmp_path, "--token", "token-of-a", "--token", "token-of-b")
    stop.append(proc)
    async with (
        Client(_with_token(url, "token-of-a")) as owner,
        Client(_with_token(url, "token-of-b")) as other,
    ):
        run = (await call(owner, "start_run", task_id=MINI))["run_id"]
        sub = (await call(owner, "submit_policy", run_id=run, episodes="0:2", files=PD_FILES))[
            "submission_id"
        ]
        unknown = f"no run {run!r}; start one with start_run(task_id)"
        for tool, arguments in (
            ("run_status", {}),
            ("get_feedback", {"submission_id": sub}),
            ("submit_policy", {"episodes": "0", "files": PD_FILES}),
            ("finalize", {"candidates": [sub]}),
        ):
            assert (await call_error(other, tool, run_id=run, **arguments)).endswith(unknown), tool
        with pytest.raises(Exception) as info:
            await other.read_resource(f"evopolicy://runs/{run}/submissions/{sub}/feedback")
        assert unknown in str(info.value)
        status = await call(owner, "run_status", run_id=run)
        assert (status["episodes_used"], status["submissions_used"], status["open"]) == (2, 1, True)
        assert (await call(owner, "finalize", run_id=run, candidates=[sub]))[
            "state"
        ] == "finalizing"
    # The operator's commands see every run.
    assert [r["run_id"] for r in _runs(data_dir)] == [run]


@pytest.mark.anyio
async def test_an_http_server_starts_a_bounded_number_of_runs_by_default(
    tmp_path: Path, stop: list
) -> None:
    from evopolicy_mcp.cli.serve import HTTP_MAX_RUNS

    proc, url, data_dir = _start(tmp_path)
    stop.append(proc)
    async with Client(url) as client:
        for _ in range(HTTP_MAX_RUNS):
            await call(client, "start_run", task_id=MINI)
        error = await call_error(client, "start_run", task_id=MINI)
    assert f"this server starts at most {HTTP_MAX_RUNS} run(s)" in error
    assert len(_runs(data_dir)) == HTTP_MAX_RUNS
