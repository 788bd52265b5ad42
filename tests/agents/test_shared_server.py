"""Where a launched agent's episodes run: `agent run --executor`, and a sweep's one server.

A sweep serves every run it has going at once from one server process, whose one
executor shares the workers between them; each agent's token opens its own run and
workspace only. Real processes throughout: the sweep, its server, its worker
processes, confined fake agents that try to reach each other.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from evopolicy_mcp.agents.client import transport
from evopolicy_mcp.agents.config import Remote
from evopolicy_mcp.agents.endpoint import RunServer, ServerError, _status
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.experiments import read_experiment
from tests.support.agents import events, fake_cli
from tests.support.host import GOOD, SEED

NEIGHBOUR = (Path(__file__).resolve().parents[1] / "support" / "neighbour.py").read_text()
WORKER = b"evopolicy_mcp.evaluation.processes"


def _parent(pid: int | str) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def _workers(ancestor: int, marker: bytes | None = None) -> dict[int, tuple[int, bytes]]:
    """Worker processes of process executors now running whose parent is ``ancestor``'s
    child (its server), or whose parent's argv holds ``marker`` (a judging process's
    data directory): pid -> (parent, parent's argv). Forks of a worker (its template)
    carry the worker's argv and are not workers. Other tests on the machine have
    workers of their own."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if WORKER not in Path(entry.path, "cmdline").read_bytes():
                continue
            parent = _parent(entry.name)
            argv = Path(f"/proc/{parent}/cmdline").read_bytes()
            if WORKER in argv:
                continue  # a worker's fork (its policy template) keeps the worker's argv
            if _parent(parent) == ancestor or (marker is not None and marker in argv):
                found[int(entry.name)] = (parent, argv)
        except (OSError, ValueError):
            continue
    return found


def _wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_sweep_serves_its_runs_from_one_server_and_keeps_them_apart(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    fake_cli(agent_env, "claude", NEIGHBOUR)
    data = tmp_path / "data"
    runs = ["e2.mini.claude.r1", "e2.mini.claude.r2"]
    spaces = {r: tmp_path / "evopolicy-workspaces" / r for r in runs}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evopolicy_mcp", "agent", "sweep", "--data-dir", str(data),
         "--tasks-dir", str(tasks_dir), "--agents", "claude", "--tasks", "mini",
         "--repeat", "2", "--parallel", "2", "--experiment", "e2", "--seed", "5",
         "--timeout", "180", "--executor", "process", "--workers", "2", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        _wait(lambda: all((spaces[r] / "ready.json").exists() for r in runs), 150, "both agents")
        workers = _workers(proc.pid)  # both runs have had episodes by now
        for mine, theirs in (runs, runs[::-1]):
            target = {"run_id": theirs, "workspace": str(spaces[theirs]),
                      "config": str(spaces[theirs] / ".mcp.json")}  # fmt: skip
            (spaces[mine] / "targets.tmp").write_text(json.dumps(target))
            (spaces[mine] / "targets.tmp").rename(spaces[mine] / "targets.json")
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()[-2000:]
    result = json.loads(out)
    assert result["complete"] is True
    for ran in result["ran"]:  # both finalized by their agents, and judged
        assert ran["reason"] == "finalized" and ran["run_state"] == "finalized", ran
        assert ran["test_score"] is not None and ran["confinement"]["confined"] is True
    # One server process served both runs, and its one executor ran their episodes.
    started = [events(data, r)["agent_started"] for r in runs]
    server = started[0]["server_pid"]
    assert isinstance(server, int) and server == started[1]["server_pid"]
    for s in started:
        assert s["executor"] == {"name": "process", "workers": 2, "ray_address": None,
                                 "shared": True}  # fmt: skip
    assert len(workers) == 2 and {parent for parent, _ in workers.values()} == {server}
    assert _holders(data, runs) == {server}  # it evaluated every submission, and judged
    record = read_experiment(data, "e2")
    assert record is not None and record.config["executor"] == "process"
    # Every attempt on the other run failed; each agent got its own run only.
    for r in runs:
        attempts = json.loads((spaces[r] / "attempts.json").read_text())
        assert len(attempts) == 11
        for a in attempts:
            assert not a["succeeded"], f"{r}: {a}"
    # Each run's token was released once its session was over.
    log = (data / "experiments" / "e2" / "logs" / "server.log").read_text()
    assert all(f"released run {r}" in log for r in runs)


def _holders(data: Path, runs: list[str]) -> set[int]:
    """The pids of the hosts that took the runs' submissions and judging."""
    store = Store(data, create=False)
    try:
        owners = [store.get_run(r).owner for r in runs]  # type: ignore[union-attr]
        owners += [s.owner for r in runs for s in store.list_submissions(r)]
    finally:
        store.close()
    return {int(str(o).split("-")[0]) for o in owners}


QUITTER = """
import json, sys
from pathlib import Path
import anyio
from mcp import Client
from evopolicy_mcp.agents.client import transport
from evopolicy_mcp.agents.config import Remote

async def play():
    argv = sys.argv[1:]
    entry = json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())["mcpServers"]["evopolicy"]
    server = Remote(entry["url"], entry["headers"]["Authorization"].removeprefix("Bearer "))
    async with Client(transport(server, {})) as client:
        run = (await client.call_tool("start_run", {"task_id": "mini"})).structured_content
        sub = await client.call_tool("submit_policy", {"run_id": run["run_id"], "episodes": "0:2",
            "wait_seconds": 40, "program_dir": str(Path.cwd() / "program")})
        assert not sub.is_error, sub

anyio.run(play)  # and exit without finalizing
"""


def test_a_run_its_agent_left_open_is_judged_by_the_sweeps_server(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    fake_cli(agent_env, "claude", QUITTER)
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "agent", "sweep", "--data-dir", str(data),
         "--tasks-dir", str(tasks_dir), "--agents", "claude", "--tasks", "mini",
         "--experiment", "e3", "--timeout", "120", "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (ran,) = json.loads(done.stdout)["ran"]
    assert ran["reason"] == "exited" and ran["fallback"] is True
    assert ran["run_state"] == "finalized" and ran["test_score"] is not None
    run = ran["run_id"]
    assert "fallback_candidates" in events(data, run)
    server = events(data, run)["agent_started"]["server_pid"]
    assert _holders(data, [run]) == {server}


def _program(ws: Path) -> Path:
    (ws / "program").mkdir(parents=True)
    (ws / "program" / "policy.py").write_text(GOOD)
    return ws


async def _calls(remote: Remote, calls: list[tuple[str, dict]]) -> list[tuple[bool, object]]:  # type: ignore[type-arg]
    out = []
    async with Client(transport(remote, {})) as client:
        for name, args in calls:
            result = await client.call_tool(name, args)
            out.append((result.is_error, result.structured_content))
    return out


def test_a_shared_servers_tokens_open_their_own_runs_only(tmp_path: Path, tasks_dir: Path) -> None:
    data = tmp_path / "data"
    for run in ("ra", "rb"):
        with Host(data, tasks_dirs=[tasks_dir], bind=("mini", run), seed=SEED) as h:
            h.prepare_run()
    server = RunServer(data, tasks_dirs=(tasks_dir,), shared=True)
    server.bind()
    (tmp_path / "logs").mkdir()
    server.start(tmp_path / "logs")
    assert server.proc is not None and server.proc.stdin is not None
    try:
        ta = server.admit("mini", "ra", _program(tmp_path / "ws-a"))
        tb = server.admit("mini", "rb", _program(tmp_path / "ws-b"))
        for entry in ("cmdline", "environ"):  # tokens came through the pipe only
            seen = Path(f"/proc/{server.pid}/{entry}").read_bytes()
            assert ta.encode() not in seen and tb.encode() not in seen
        assert _status(server.port, None) == 401 and _status(server.port, "x" * 43) == 401
        answers = anyio.run(_calls, Remote(server.url, ta), [
            ("start_run", {"task_id": "mini"}),
            ("run_status", {"run_id": "rb"}),
            ("submit_policy", {"run_id": "ra", "episodes": "0", "wait_seconds": 0,
                               "program_dir": str(tmp_path / "ws-b" / "program")}),
            ("submit_policy", {"run_id": "ra", "episodes": "0", "wait_seconds": 30,
                               "program_dir": str(tmp_path / "ws-a" / "program")}),
        ])  # fmt: skip
        assert answers[0] == (False, answers[0][1]) and answers[0][1]["run_id"] == "ra"  # type: ignore[index]
        assert answers[1][0] and answers[2][0]  # the other run; the other's workspace
        assert not answers[3][0]  # its own program, from its own workspace
        server.release(ta)
        _wait(lambda: _status(server.port, ta) == 401, 10, "the released token to close")
        assert _status(server.port, tb) not in (None, 401)
        with pytest.raises(ServerError, match="did not take run"):
            server.admit("nope", "rc", tmp_path, timeout=2)  # an unknown task: not bound
    except BaseException:
        server.stop()
        raise
    server.proc.stdin.close()  # the launcher is gone: the server stops by itself
    assert server.proc.wait(30) == 0
    server.stop()


def test_agent_run_on_the_process_executor_runs_episodes_on_worker_processes(
    tmp_path: Path, tasks_dir: Path
) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evopolicy_mcp", "agent", "run", "--agent", "scripted",
         "--task", "mini", "--data-dir", str(data), "--tasks-dir", str(tasks_dir),
         "--workspace", str(tmp_path / "ws"), "--run", "rp", "--seed", str(SEED),
         "--executor", "process", "--workers", "2", "--timeout", "120", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    seen: dict[int, tuple[int, bytes]] = {}
    try:
        end = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < end:
            seen.update(_workers(proc.pid, str(data).encode()))
            time.sleep(0.05)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err.decode()[-2000:]
    outcome = json.loads(out)
    assert outcome["reason"] == "finalized" and outcome["test_score"] is not None
    started = events(data, "rp")["agent_started"]
    assert started["executor"] == {"name": "process", "workers": 2, "ray_address": None,
                                   "shared": False}  # fmt: skip
    server = started["server_pid"]
    # The server's episodes ran on its two workers; the judging process's on its own.
    assert sum(parent == server for parent, _ in seen.values()) == 2, seen
    judging = [argv for parent, argv in seen.values() if str(data).encode() in argv]
    for argv in judging:
        assert argv.split(b"\0")[3:5] == [b"judge", b"rp"], argv
        assert b"--executor\0process" in argv, argv
