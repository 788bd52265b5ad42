"""The agent launcher with fake CLIs that are real processes on PATH: the environment
allowlist as seen by the CLI, stopping, terminal reasons and records, the whole loop,
and `agent check`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evopolicy_mcp.agents import confine
from evopolicy_mcp.agents.check import check_agent, parse_health
from evopolicy_mcp.agents.launch import (
    PROVIDERS,
    AgentError,
    run_agent,
)
from evopolicy_mcp.cli.operator import format_report
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.host.reports import build_rows
from evopolicy_mcp.kernel.sandbox import Layer
from evopolicy_mcp.store.database import DB_NAME, Store
from tests.support.agents import SECRET, events, fake_cli, options
from tests.support.host import SEED

# ------------------------------------------------------------------ real launches

ENV_DUMP = """
import json, os, sys
info = {
    "env": dict(os.environ),
    "argv": sys.argv[1:],
    "stdin": sys.stdin.read(),
    "pid": os.getpid(),
    "cwd": os.getcwd(),
}
with open("seen.json", "w") as f:
    json.dump(info, f)
print(json.dumps({"type": "system", "subtype": "init"}))
print("fake claude: no login", file=sys.stderr)
"""


def test_agent_sees_only_the_allowlist(agent_env: Path, tmp_path: Path, tasks_dir: Path) -> None:
    fake_cli(agent_env, "claude", ENV_DUMP)
    outcome = run_agent(options(tmp_path, tasks_dir))
    ws = tmp_path / "ws"
    seen = json.loads((ws / "seen.json").read_text())
    assert seen["env"]["ANTHROPIC_API_KEY"] == "sk-ant-for-claude"
    assert "EVOPOLICY_TEST_SECRET" not in seen["env"]
    assert "OPENAI_API_KEY" not in seen["env"]
    assert SECRET not in json.dumps(seen)
    assert seen["stdin"] == "" and seen["cwd"] == str(ws)
    if confine.probe()["pids"].available:  # the first process of its own PID namespace
        assert seen["pid"] == 2, "PID 1 is the namespace's init"
    assert seen["argv"][-1] == (ws / "TASK.md").read_text()
    # It never reached its run: that is a failed start, with the CLI's own last word.
    assert outcome.reason == "failed_to_start"
    assert outcome.message == "fake claude: no login"
    assert outcome.run_state == "open" and not outcome.candidates
    ended = events(tmp_path / "data", "r1")["agent_ended"]
    assert ended["reason"] == "failed_to_start" and ended["exit_code"] == 0
    record = tmp_path / "data" / "runs" / "r1" / "agent"
    assert json.loads((record / "stdout.jsonl").read_text()) == {
        "type": "system",
        "subtype": "init",
    }
    assert "no login" in (record / "stderr.log").read_text()


def test_pass_env_adds_a_named_variable(agent_env: Path, tmp_path: Path, tasks_dir: Path) -> None:
    fake_cli(agent_env, "claude", ENV_DUMP)
    run_agent(options(tmp_path, tasks_dir, pass_env=("EVOPOLICY_TEST_*",)))
    seen = json.loads((tmp_path / "ws" / "seen.json").read_text())
    assert seen["env"]["EVOPOLICY_TEST_SECRET"] == SECRET


def test_workspace_holds_program_task_and_config_only(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    fake_cli(agent_env, "claude", "pass\n")
    run_agent(options(tmp_path, tasks_dir))
    ws = tmp_path / "ws"
    files = sorted(str(p.relative_to(ws)) for p in ws.rglob("*") if p.is_file())
    assert files == [".mcp.json", "TASK.md", "program/policy.py"]
    store = Store(tmp_path / "data", create=False)
    try:
        run = store.get_run("r1")
    finally:
        store.close()
    assert run is not None
    texts = "".join(p.read_text() for p in ws.rglob("*") if p.is_file())
    assert run.secret.hex() not in texts
    assert str(tmp_path / "data") not in texts and str(tasks_dir) not in texts
    config = json.loads((ws / ".mcp.json").read_text())["mcpServers"]["evopolicy"]
    assert config["type"] == "http" and config["url"].startswith("http://127.0.0.1:")
    assert config["headers"]["Authorization"].startswith("Bearer ")
    assert (ws / ".mcp.json").stat().st_mode & 0o077 == 0  # the token: the owner's only


IGNORES_SIGTERM = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
# Its child leaves the CLI's process group, as Codex does with its MCP servers; another
# leaves its session. Each names the workspace on its command line, for the test to find.
subprocess.Popen([sys.executable, "-c", stubborn, os.getcwd()], process_group=0)
subprocess.Popen([sys.executable, "-c", stubborn, os.getcwd()], start_new_session=True)
with open("started", "w") as f:
    f.write("yes")
print('{"type": "system", "subtype": "init"}', flush=True)
time.sleep(300)
"""


def _naming(text: str) -> list[int]:
    """Live processes (zombies are dead for this purpose) whose command line holds
    ``text``: the fake CLI, its children, whatever they left behind."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes()
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


def _survivors(ws: Path) -> list[int]:
    """What is left of the CLI's processes. Without a PID namespace for the agent, the
    child that left the session is beyond the launcher's reach: it is killed here."""
    left = _naming(str(ws))
    if not confine.probe()["pids"].available:
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return []
    return left


def test_timeout_kills_a_cli_that_ignores_sigterm(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    fake_cli(agent_env, "claude", IGNORES_SIGTERM)
    start = time.monotonic()
    outcome = run_agent(options(tmp_path, tasks_dir, timeout=3.0))
    elapsed = time.monotonic() - start
    assert outcome.reason == "timed_out"
    assert elapsed < 30
    assert (tmp_path / "ws" / "started").exists()
    assert not _survivors(tmp_path / "ws"), "the CLI or its children outlived the stop"
    ended = events(tmp_path / "data", "r1")["agent_ended"]
    assert ended["reason"] == "timed_out" and ended["exit_code"] == -9
    assert (tmp_path / "data" / "runs" / "r1" / "agent" / "stdout.jsonl").read_text()


def test_sigterm_to_the_launcher_stops_the_cli_and_records_it(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    fake_cli(agent_env, "claude", IGNORES_SIGTERM)
    data, ws = tmp_path / "data", tmp_path / "ws"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "evopolicy_mcp", "agent", "run", "--agent", "claude"]
        + ["--task", "mini", "--tasks-dir", str(tasks_dir), "--data-dir", str(data)]
        + ["--workspace", str(ws), "--run", "r1", "--timeout", "300"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + 60
        while not (ws / "started").exists() and time.monotonic() < end:
            time.sleep(0.1)
        assert (ws / "started").exists(), "the fake CLI never started"
        time.sleep(0.2)
        assert len(_naming(str(ws))) >= 3  # the CLI and both children: the check can fail
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 130
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert not _survivors(ws), "the CLI or its children outlived the launcher"
    assert events(data, "r1")["agent_ended"]["reason"] == "interrupted"


def test_a_workspace_that_cannot_be_made_creates_no_run(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    fake_cli(agent_env, "claude", "pass\n")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(AgentError, match="cannot write the workspace"):
        run_agent(options(tmp_path, tasks_dir, workspace=tmp_path / "afile" / "ws"))
    store = Store(tmp_path / "data", create=False)
    try:
        assert store.list_runs() == []
    finally:
        store.close()


def test_a_missing_cli_creates_no_run_and_no_workspace(
    agent_env: Path, tmp_path: Path, tasks_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(agent_env))  # an empty directory: no qodercli anywhere
    with pytest.raises(AgentError, match="qodercli is not on PATH; install it .*npm install"):
        run_agent(options(tmp_path, tasks_dir, agent="qoder"))
    assert not (tmp_path / "ws").exists()
    assert not (tmp_path / "data" / DB_NAME).exists()


# A CLI that reaches its run through the MCP config, like a real agent would.
SUBMITS_THEN_EXITS = """
import json, os, anyio
from mcp import Client
from evopolicy_mcp.agents.client import http_transport
from evopolicy_mcp.agents.config import Remote

entry = json.load(open(".mcp.json"))["mcpServers"]["evopolicy"]
remote = Remote(entry["url"], entry["headers"]["Authorization"].removeprefix("Bearer "))

async def main():
    async with Client(http_transport(remote)) as c:
        run = (await c.call_tool("start_run", {"task_id": "mini"})).structured_content
        for eps in ("0:2", "2:4"):
            await c.call_tool("submit_policy", {"run_id": run["run_id"], "episodes": eps,
                              "program_dir": os.path.abspath("program"), "wait_seconds": 40})
        {after}

anyio.run(main)
"""


def test_exit_without_finalize_judges_fallback_candidates(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    fake_cli(agent_env, "claude", SUBMITS_THEN_EXITS.replace("{after}", "pass"))
    outcome = run_agent(options(tmp_path, tasks_dir))
    assert outcome.reason == "exited" and outcome.exit_code == 0
    assert outcome.fallback
    # Both submissions are the baseline: one program, so one candidate (its better score).
    assert len(outcome.candidates) == 1 and outcome.candidates[0] in ("s1", "s2")
    assert outcome.run_state == "finalized"
    assert outcome.selected == outcome.candidates[0] and outcome.test_score is not None
    kinds = events(tmp_path / "data", "r1")
    assert kinds["fallback_candidates"]["candidates"] == outcome.candidates
    assert "attached" in kinds
    with Host(tmp_path / "data", tasks_dirs=[tasks_dir]) as host:
        text = format_report(host.report("r1"))
    assert "agent: claude exited after" in text
    assert "the agent did not finalize" in text


def test_finalize_stops_a_lingering_cli(agent_env: Path, tmp_path: Path, tasks_dir: Path) -> None:
    after = "\n        ".join(
        [
            'await c.call_tool("finalize", {"run_id": run["run_id"], "candidates": ["s2"]})',
            "import signal, time",
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
            "time.sleep(300)",
        ]
    )
    fake_cli(agent_env, "claude", SUBMITS_THEN_EXITS.replace("{after}", after))
    start = time.monotonic()
    outcome = run_agent(options(tmp_path, tasks_dir, timeout=120.0))
    assert outcome.reason == "finalized" and not outcome.fallback
    assert time.monotonic() - start < 90  # stopped after the grace, not at the time limit
    assert outcome.candidates == ["s2"] and outcome.selected == "s2"
    assert outcome.run_state == "finalized" and outcome.validation_score is not None


def test_bad_requests_create_nothing(agent_env: Path, tmp_path: Path, tasks_dir: Path) -> None:
    fake_cli(agent_env, "claude", "pass\n")  # installed: the requests' own faults are found
    data = tmp_path / "data"
    with pytest.raises(AgentError, match="overlaps the data directory"):
        run_agent(options(tmp_path, tasks_dir, workspace=data / "ws"))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "old.txt").write_text("x")
    with pytest.raises(AgentError, match="not empty"):
        run_agent(options(tmp_path, tasks_dir))
    with pytest.raises(AgentError, match="unknown task"):
        run_agent(options(tmp_path, tasks_dir, task="nope", workspace=tmp_path / "w2"))
    fake_cli(agent_env, "kimi", "pass\n")
    with pytest.raises(AgentError, match="effort"):
        run_agent(
            options(tmp_path, tasks_dir, agent="kimi", effort="high", workspace=tmp_path / "w3")
        )
    if data.exists():
        store = Store(data, create=False)
        try:
            assert store.list_runs() == []
        finally:
            store.close()
    assert not (tmp_path / "w2").exists() and not (tmp_path / "w3").exists()


# ------------------------------------------------------------------ the whole loop


def test_scripted_agent_through_the_command(tmp_path: Path, tasks_dir: Path) -> None:
    """`agent run --agent scripted`: the launcher path end to end, judged, with records."""
    data, ws = tmp_path / "data", tmp_path / "ws"
    proc = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "agent", "run", "--agent", "scripted"]
        + ["--task", "mini", "--tasks-dir", str(tasks_dir), "--data-dir", str(data)]
        + ["--workspace", str(ws), "--run", "loop", "--seed", str(SEED), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert outcome["reason"] == "finalized" and not outcome["fallback"]
    assert outcome["run_state"] == "finalized"
    assert outcome["selected"] in outcome["candidates"]
    assert outcome["test_score"] is not None
    log = (data / "runs" / "loop" / "agent" / "stdout.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["type"] == "result"
    assert json.loads(log[-1])["candidates"] == outcome["candidates"]
    kinds = events(data, "loop")
    assert kinds["agent_ended"]["reason"] == "finalized"
    assert "EVOPOLICY" not in " ".join(kinds["agent_started"]["env"])  # type: ignore[arg-type]
    # It ran confined, and the record and the report say how, next to the scores.
    record = outcome["confinement"]
    assert record["confined"] is True and record == kinds["agent_started"]["confinement"]
    assert set(record["layers"]) | set(record["missing"]) == set(confine.LAYERS)
    report = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "report", "loop", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    agent_line = next(line for line in report.splitlines() if line.startswith("agent: scripted"))
    assert agent_line.startswith("agent: scripted, confined (filesystem")
    lines = report.splitlines()
    assert (
        lines.index(agent_line)
        == next(i for i, line in enumerate(lines) if line.startswith("gap:")) + 1
    )
    # Everything the agent saw: its workspace and every tool result it logged.
    seen = "\n".join(log) + "".join(p.read_text() for p in ws.rglob("*") if p.is_file())
    store = Store(data, create=False)
    try:
        run = store.get_run("loop")
    finally:
        store.close()
    assert run is not None
    assert run.secret.hex() not in seen
    for split, size in (("validation", 3), ("test", 3)):
        for i in range(size):
            assert str(seeds.episode_seed(run.secret, "mini", split, i)) not in seen
            assert str(seeds.policy_seed(run.secret, "mini", split, i)) not in seen


# ------------------------------------------------------------------ agent check

CLAUDE_LIST = """Checking MCP server health…

evopolicy: /py -m evopolicy_mcp serve --data-dir /d - ✔ Connected
other: npx other - ✘ Failed to connect
"""
QODER_LIST = """Configured MCP servers:

✓ evopolicy: /py -m evopolicy_mcp serve (stdio) - Connected · Direct MCP Server
"""


def test_health_output_is_parsed_for_our_server_only() -> None:
    assert parse_health(CLAUDE_LIST) == ("Connected", "✔ Connected")
    assert parse_health(QODER_LIST)[0] == "Connected"
    failed = CLAUDE_LIST.replace("✔ Connected", "✘ Failed to connect")
    assert parse_health(failed) == ("Failed", "✘ Failed to connect")
    assert parse_health(QODER_LIST.replace("✓", "✗").replace("Connected", "Disconnected"))[0] == (
        "Failed"
    )
    assert parse_health("No MCP servers configured.")[0] == "Failed"


def test_check_of_the_scripted_agent_reaches_the_server(tasks_dir: Path) -> None:
    report = check_agent(PROVIDERS["scripted"], tasks_dirs=(tasks_dir,))
    assert report.ok, report
    assert "list_tasks answered" in report.detail
    assert report.confinement["confined"] is True
    assert set(report.confinement["layers"]) == {
        name for name, layer in confine.probe().items() if layer.available
    }


def test_check_reports_a_missing_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    report = check_agent(PROVIDERS["qoder"])
    assert not report.ok and report.executable is None
    assert report.server == "not checked" and "not on PATH" in report.detail


def require_cli(executable: str) -> None:
    """Skip where the real CLI is missing, unless EVOPOLICY_REQUIRE_CLIS names it (CI
    sets it once it has installed them): then its absence fails the test."""
    if shutil.which(executable) is not None:
        return
    if executable in os.environ.get("EVOPOLICY_REQUIRE_CLIS", "").split(","):
        pytest.fail(f"{executable} is required here (EVOPOLICY_REQUIRE_CLIS) but not on PATH")
    pytest.skip(f"{executable} is not installed (npm install -g, see the README)")


def test_check_reports_a_cli_that_cannot_start(agent_env: Path) -> None:
    fake_cli(agent_env, "qodercli", "import sys\nsys.exit('SyntaxError: needs Node >= 22')\n")
    report = check_agent(PROVIDERS["qoder"])
    assert report.executable == str(agent_env / "qodercli")
    assert not report.ok and report.version is None
    assert "failed (exit code 1): SyntaxError: needs Node >= 22" in report.detail


@pytest.mark.parametrize("agent", ["claude", "qoder"])
def test_real_cli_health_check_connects(agent: str, tasks_dir: Path) -> None:
    """The CLI's own health check starts our server from the generated config."""
    provider = PROVIDERS[agent]
    require_cli(provider.executable)
    report = check_agent(provider, tasks_dirs=(tasks_dir,))
    assert report.how == f"{provider.executable} mcp list"
    assert report.server == "Connected", report.detail
    assert report.version and report.version[0].isdigit()


def test_real_claude_takes_the_command_line_and_the_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tasks_dir: Path
) -> None:
    """The installed Claude Code parses our headless command line and loads our server;
    with no login (a scratch config home) it stops there, which is a failed start."""
    require_cli("claude")
    for name in [n for n in os.environ if n.startswith(("ANTHROPIC_", "CLAUDE_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    monkeypatch.setenv("IS_SANDBOX", "1")
    outcome = run_agent(options(tmp_path, tasks_dir, timeout=120.0))
    assert outcome.reason == "failed_to_start"
    assert "log" in outcome.message.lower(), outcome.message
    record = tmp_path / "data" / "runs" / "r1" / "agent"
    init = json.loads((record / "stdout.jsonl").read_text().splitlines()[0])
    assert init["type"] == "system" and init["subtype"] == "init"
    assert init["permissionMode"] == "bypassPermissions"
    assert [s["name"] for s in init["mcp_servers"]] == ["evopolicy"]
    assert init["cwd"] == str(tmp_path / "ws")


# ------------------------------------------------------------------ confinement modes


def test_no_confine_is_recorded_and_reported(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    fake_cli(agent_env, "claude", ENV_DUMP)
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "agent", "run", "--agent", "claude"]
        + ["--task", "mini", "--tasks-dir", str(tasks_dir), "--data-dir", str(data)]
        + ["--workspace", str(tmp_path / "ws"), "--run", "r1", "--no-confine", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcome = json.loads(proc.stdout)
    assert outcome["confinement"] == {"confined": False, "mode": "off", "layers": {}, "missing": {}}
    assert events(data, "r1")["agent_started"]["confinement"] == outcome["confinement"]
    seen = json.loads((tmp_path / "ws" / "seen.json").read_text())
    assert seen["pid"] != 2  # no namespace of its own
    with Host(data, tasks_dirs=[tasks_dir]) as host:
        text = format_report(host.report("r1"))
    assert "agent: claude, UNCONFINED (--no-confine)" in text
    store = Store(data, create=False)
    try:
        rows = build_rows(store)
    finally:
        store.close()
    assert [r.confinement for r in rows] == ["unconfined"]
    runs = subprocess.run(
        [sys.executable, "-m", "evopolicy_mcp", "runs", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "UNCONFINED" in runs.splitlines()[2]


def test_strict_confinement_refuses_when_a_layer_is_missing_and_creates_nothing(
    agent_env: Path, tmp_path: Path, tasks_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cli(agent_env, "claude", "pass\n")
    without_pids = {**confine.probe(), "pids": Layer("pids", False, "no PID namespace here")}
    monkeypatch.setattr(confine, "probe", lambda: without_pids)
    with pytest.raises(AgentError, match="--confine strict.*pids: no PID namespace here"):
        run_agent(options(tmp_path, tasks_dir, confine="strict"))
    assert not (tmp_path / "ws").exists() and not (tmp_path / "data" / DB_NAME).exists()
    # The default takes what there is, and the record says what was missing.
    outcome = run_agent(options(tmp_path, tasks_dir))
    assert outcome.confinement["missing"] == {"pids": "no PID namespace here"}
    assert "pids" not in outcome.confinement["layers"]
    with Host(tmp_path / "data", tasks_dirs=[tasks_dir]) as host:
        text = format_report(host.report("r1"))
    assert "layers missing: pids" in text
