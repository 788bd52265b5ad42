"""The server as agent CLIs run it: a real subprocess speaking MCP over stdio."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.support.server import MINI, PD_FILES, call, serve_argv, slow_files, write_task

pytestmark = pytest.mark.anyio


def _server(data_dir: Path, tasks_dir: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "evopolicy_mcp",
            "serve",
            "--data-dir",
            str(data_dir),
            "--tasks-dir",
            str(tasks_dir),
            *extra,
        ],
        env=dict(os.environ),
    )


def _descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (through each thread's children list)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            for child in children:
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _children_running(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker`` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _server_pid(marker: str) -> int:
    """The serve process this test started (policy processes fork from it, same cmdline)."""
    me = os.getpid()
    for pid in _children_running(marker):
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if int(stat[1]) == me:
            return pid
    raise AssertionError("the server subprocess was not found")


async def test_the_server_speaks_mcp_over_stdio(tmp_path: Path) -> None:
    tasks_dir = tmp_path / "tasks"
    write_task(tasks_dir)
    async with Client(_server(tmp_path / "data", tasks_dir)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"submit_policy", "get_feedback", "finalize"} <= tools
        run = await call(client, "start_run", task_id=MINI)
        view = await call(
            client, "submit_policy", run_id=run["run_id"], episodes="0:2", files=PD_FILES
        )
        assert (view["status"], view["score"]) == ("complete", 500.0), view


async def test_arguments_the_schema_refuses_get_one_line_over_stdio(tmp_path: Path) -> None:
    tasks_dir = tmp_path / "tasks"
    write_task(tasks_dir)
    async with Client(_server(tmp_path / "data", tasks_dir)) as client:
        run = await call(client, "start_run", task_id=MINI)
        result = await client.call_tool(
            "submit_policy",
            {"run_id": run["run_id"], "episodes": "0", "files": PD_FILES, "wait_seconds": 100},
        )
        assert result.is_error
        message = " ".join(getattr(block, "text", "") for block in result.content)
        assert message == (
            "Error executing tool submit_policy: wait_seconds must be a number from 0 to 50, "
            "not 100."
        )
        status = await call(client, "run_status", run_id=run["run_id"])
        assert (status["episodes_used"], status["submissions_used"]) == (0, 0)


async def test_a_server_killed_mid_evaluation_resumes_it_charged_once(tmp_path: Path) -> None:
    tasks_dir, data_dir = tmp_path / "tasks", tmp_path / "data"
    write_task(tasks_dir)
    marker = str(data_dir)
    async with Client(_server(data_dir, tasks_dir, "--workers", "1")) as client:
        run = await call(client, "start_run", task_id=MINI)
        rid = run["run_id"]
        first = await call(
            client,
            "submit_policy",
            run_id=rid,
            episodes="0:4",
            files=slow_files(0.6),
            wait_seconds=0,
        )
        sid = first["submission_id"]
        deadline = time.monotonic() + 30
        while True:
            view = await call(client, "get_feedback", run_id=rid, submission_id=sid)
            if view["episodes_done"] >= 1:
                break
            assert time.monotonic() < deadline, "no episode finished"
            await anyio.sleep(0.05)
        assert view["status"] == "running" and view["episodes_done"] < 4
        server_pid = _server_pid(marker)
        # The template, its spares and the running episode's policy process at least.
        family = _descendants(server_pid)
        assert len(family) >= 2, family
        os.kill(server_pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await call(client, "run_status", run_id=rid)  # the connection is gone
    # Policy processes die with their server, none is left behind.
    deadline = time.monotonic() + 10
    while (_children_running(marker) or _alive(family)) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert not _children_running(marker)
    assert not _alive(family), f"left behind by the killed server: {_alive(family)}"

    async with Client(_server(data_dir, tasks_dir)) as client:
        done = await call(client, "get_feedback", run_id=rid, submission_id=sid, wait_seconds=45)
        assert done["status"] == "complete"
        assert done["episodes_done"] == 4 and done["score"] == 500.0
        status = await call(client, "run_status", run_id=rid)
        assert (status["episodes_used"], status["submissions_used"]) == (4, 1)
        assert status["remaining"]["episodes"] == 8


def _serve_once(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        serve_argv(tmp_path / "d", *extra),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_with_a_missing_tasks_dir_fails_with_one_line(tmp_path: Path) -> None:
    proc = _serve_once(tmp_path, "--tasks-dir", str(tmp_path / "missing"))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].startswith("evopolicy-mcp serve: error:")
    assert "does not exist" in proc.stderr


def test_serve_refuses_a_program_root_that_is_not_a_folder(tmp_path: Path) -> None:
    proc = _serve_once(tmp_path, "--program-root", str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"evopolicy-mcp serve: error: program root {tmp_path / 'nope'} is not a folder"
    )


async def test_a_run_finalized_by_a_client_that_quits_at_once_reaches_its_assessment(
    tmp_path: Path,
) -> None:
    from evopolicy_mcp.store.database import Store

    tasks_dir, data_dir = tmp_path / "tasks", tmp_path / "data"
    write_task(tasks_dir)
    async with Client(_server(data_dir, tasks_dir)) as client:
        run = await call(client, "start_run", task_id=MINI)
        rid = run["run_id"]
        # Slow to start: judging (4 validation + 4 assessment episodes) outlasts the
        # client's shutdown of the server (stdin closed, SIGTERM at 2 s, SIGKILL at 4 s).
        view = await call(client, "submit_policy", run_id=rid, episodes="0:1",
                          files=slow_files(1.5))  # fmt: skip
        await call(client, "finalize", run_id=rid, candidates=[view["submission_id"]])
    # No further command: the run reaches its assessment on its own.
    store = Store(data_dir)
    try:
        deadline = time.monotonic() + 120
        while store.get_run(rid).state != "finalized":  # type: ignore[union-attr]
            assert time.monotonic() < deadline, [e.kind for e in store.events(rid)]
            await anyio.sleep(0.2)
        assert sorted(r.split for r in store.results(rid)) == ["test", "validation"]
    finally:
        store.close()
    # The judging process exits once it is done.
    deadline = time.monotonic() + 30
    while _children_running(str(data_dir)) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert not _children_running(str(data_dir))
