"""The agent cannot cheat: a hostile fake CLI, confined by `agent run`, attacks the host.

The fake CLI (tests/support/attacker.py, installed under each provider's name)
reaches its run through the config `agent run` generated for that provider, and
meanwhile tries to read the records, another run's workspace and the task
files, to read, trace and signal the server and its policy processes, to use
another run's endpoint, and reads every file it can under the paths the test
knows. Every attempt must fail, nothing it read may hold the run secret or a
hidden seed, and the run must end normally, judged.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from evopolicy_mcp.agents import confine
from evopolicy_mcp.agents.endpoint import RunServer
from evopolicy_mcp.agents.launch import AgentOutcome, run_agent
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.kernel.sandbox import Layer
from evopolicy_mcp.store.database import DB_NAME, Store
from tests.support.agents import events, fake_cli, options

ATTACKER = (Path(__file__).resolve().parents[1] / "support" / "attacker.py").read_text()
OTHER_SECRET = "another-runs-notes-5b1e"
EXECUTABLES = {"claude": "claude", "codex": "codex", "kimi": "kimi", "qoder": "qodercli"}


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _server_of(run_id: str) -> int | None:
    """The pid of the server `agent run` started for ``run_id``."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in argv and run_id.encode() in argv and b"--fd" in argv:
                return int(entry.name)
    return None


@pytest.fixture
def other_run(tmp_path: Path, tasks_dir: Path) -> Iterator[tuple[str, Path]]:
    """Another run's server (its own data directory) and workspace, up meanwhile."""
    server = RunServer(tmp_path / "other-data", tasks_dirs=(tasks_dir,))
    server.bind()
    (tmp_path / "other-log").mkdir()
    server.start(tmp_path / "other-log")
    workspace = tmp_path / "other-ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(OTHER_SECRET)
    (workspace / "policy.py").write_text(  # a program: only the folder's place refuses it
        "def make_policy(context):\n    return P()\n\n"
        "class P:\n    def act(self, observation):\n        return 0\n"
    )
    try:
        yield server.url, workspace
    finally:
        server.stop()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Path]:
    """A host daemon's Unix socket (as /run/systemd/private would be) that greets."""
    path = tmp_path / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"root shell here")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    stop.set()
    thread.join(5)
    server.close()


def _attack(
    provider: str,
    tmp_path: Path,
    tasks_dir: Path,
    bin_dir: Path,
    other: tuple[str, Path],
    daemon: Path,
) -> tuple[AgentOutcome, str, Path]:
    fake_cli(bin_dir, EXECUTABLES[provider], ATTACKER)
    run_id = f"attacked-{uuid.uuid4().hex[:8]}"
    ws, data = tmp_path / "ws", tmp_path / "data"
    opts = replace(options(tmp_path, tasks_dir, agent=provider, run=run_id), timeout=240.0)
    result: list[AgentOutcome] = []
    thread = threading.Thread(target=lambda: result.append(run_agent(opts)), daemon=True)
    thread.start()
    server = None
    while server is None and thread.is_alive():
        server = _server_of(run_id)
        threading.Event().wait(0.05)
    assert server is not None, "the run's server never started"
    pids = [server]
    for _ in range(600):  # the template appears with the first submission
        pids = [server, *_children(server)]
        if len(pids) > 1 or not thread.is_alive():
            break
        threading.Event().wait(0.1)
    targets = {
        "data_dir": str(data),
        "sqlite": str(data / DB_NAME),
        "run_dir": str(data / "runs" / run_id),
        "other_workspace": str(other[1]),
        "other_file": str(other[1] / "notes.txt"),
        "other_url": other[0],
        "task_file": str(next(tasks_dir.glob("*.toml"))),
        "pids": pids,
        "socket": str(daemon),
        "roots": [str(tmp_path), str(data), str(tasks_dir), os.path.expanduser("~")],
    }
    (ws / "targets.tmp").write_text(json.dumps(targets))
    (ws / "targets.tmp").rename(ws / "targets.json")
    thread.join(300)
    assert result, "agent run did not return"
    return result[0], run_id, ws


def _check(
    outcome: AgentOutcome, run_id: str, ws: Path, tmp_path: Path, gaps: tuple[str, ...] = ()
) -> None:
    """Every attempt failed, but those in ``gaps`` (documented in docs/security.md)."""
    assert outcome.reason == "finalized", outcome
    assert outcome.run_state == "finalized" and outcome.selected == "s1"
    attempts = json.loads((ws / "attempts.json").read_text())
    assert len(attempts) > 20
    cmdlines = [a for a in attempts if a["what"].endswith("/cmdline")]
    for a in attempts:
        if a in cmdlines:
            # With the PID namespace it cannot even name the server; without it the
            # command line is readable, and holds no path and no token.
            assert str(tmp_path) not in a["detail"], a
            continue
        if a["what"] in gaps:
            continue
        assert not a["succeeded"], f"the sandbox let this through: {a}"
    readable = json.loads((ws / "readable.json").read_text())
    for path in readable:
        for forbidden in ("data", "other-ws", "tasks", "other-data"):
            assert not Path(path).is_relative_to(tmp_path / forbidden), path
    loot = (ws / "loot.txt").read_bytes()
    store = Store(tmp_path / "data", create=False)
    try:
        run = store.get_run(run_id)
    finally:
        store.close()
    assert run is not None
    assert run.secret.hex().encode() not in loot
    assert OTHER_SECRET.encode() not in loot
    for split, size in (("train", 8), ("validation", 3), ("test", 3)):
        for i in range(size):
            assert str(seeds.episode_seed(run.secret, "mini", split, i)).encode() not in loot
    started = events(tmp_path / "data", run_id)["agent_started"]
    assert started["confinement"]["confined"] is True  # type: ignore[index]


@pytest.mark.parametrize("provider", ["claude", "codex", "kimi", "qoder"])
def test_a_hostile_agent_reaches_nothing_and_the_run_completes(
    provider: str,
    agent_env: Path,
    tmp_path: Path,
    tasks_dir: Path,
    other_run: tuple[str, Path],
    daemon: Path,
) -> None:
    outcome, run_id, ws = _attack(provider, tmp_path, tasks_dir, agent_env, other_run, daemon)
    _check(outcome, run_id, ws, tmp_path)
    assert set(outcome.confinement["layers"]) == {
        name for name, layer in confine.probe().items() if layer.available
    }


def test_landlock_alone_still_holds(
    agent_env: Path,
    tmp_path: Path,
    tasks_dir: Path,
    other_run: tuple[str, Path],
    daemon: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a user without namespaces: no private /tmp, no PID namespace, the server's
    pid in plain sight; Landlock and the dropped privileges must hold on their own."""
    found = confine.probe()
    if not found["filesystem"].available or not found["signals"].available:
        pytest.skip("needs Landlock ABI 6")
    without = {
        **found,
        "mounts": Layer("mounts", False, "left out by the test"),
        "pids": Layer("pids", False, "left out by the test"),
    }
    monkeypatch.setattr(confine, "probe", lambda: without)
    outcome, run_id, ws = _attack("claude", tmp_path, tasks_dir, agent_env, other_run, daemon)
    # Landlock does not check connecting to a Unix socket by its path (docs/security.md).
    _check(outcome, run_id, ws, tmp_path, gaps=("connect to a host daemon's Unix socket",))
    assert set(outcome.confinement["missing"]) == {"mounts", "pids"}
