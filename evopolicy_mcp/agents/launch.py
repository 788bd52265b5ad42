"""The launcher: one agent CLI, headless, against one run of a task.

Steps, the same for every provider:

1. Create the run host-side (budget from the task) and a fresh workspace:
   ``program/`` seeded with the task's baseline, ``TASK.md`` with the prompt,
   and the CLI's MCP config pointing at ``evopolicy-mcp serve`` bound to the run.
2. Start the CLI in its own process group, stdin closed, with the allowlisted
   environment only; copy its stdout and stderr (bounded) into the run record.
3. Stop it (SIGTERM, then SIGKILL of the whole group) once the run is
   finalized and a short grace has passed, or when the time is up.
4. Judge as usual. A host opened on the data directory takes over whatever the
   server left (submissions still evaluating, a finalize under way). If the
   agent never finalized, its best complete submissions by public score become
   the candidates (recorded as ``fallback``); with none, the run stays open.

The terminal reason is one of :data:`REASONS`.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from evopolicy_mcp import guide
from evopolicy_mcp.agent_config import Launch
from evopolicy_mcp.host import Host, HostError
from evopolicy_mcp.sandbox import Isolation
from evopolicy_mcp.store import PENDING, Store
from evopolicy_mcp.tasks import Task

from . import claude, codex, kimi, qoder, scripted
from .base import AgentTask, Invocation, Provider, Unsupported, allowed_env

__all__ = [
    "PROVIDERS",
    "REASONS",
    "AgentError",
    "AgentOptions",
    "AgentOutcome",
    "run_agent",
    "stop_group",
    "write_files",
]

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (claude.PROVIDER, codex.PROVIDER, kimi.PROVIDER, qoder.PROVIDER, scripted.PROVIDER)
}
REASONS = {
    "finalized": "the agent finalized the run",
    "exited": "the agent exited without finalizing",
    "timed_out": "the agent was stopped at the time limit",
    "failed_to_start": "the agent could not be launched, or ended without reaching its run",
    "interrupted": "the operator interrupted the launcher",
}
LOG_CAP = 64 << 20  # bytes kept of each of the CLI's stdout and stderr
POLL_SECONDS = 0.2
GROUP_GONE_SECONDS = 10.0
WORKSPACE_NOTE = (
    "Your workspace is the current directory. `program/` holds the task's baseline "
    "program; edit it there and submit it with `program_dir` set to that directory's "
    "absolute path (or pass the files inline). These instructions are also in TASK.md."
)


class AgentError(Exception):
    """Bad input to ``agent run`` (nothing was created): one line, exit code 2."""


@dataclass(frozen=True)
class AgentOptions:
    agent: str
    task: str
    data_dir: Path
    tasks_dirs: tuple[Path, ...] = ()
    workspace: Path | None = None
    run: str | None = None
    model: str | None = None
    effort: str | None = None
    timeout: float = 3600.0
    grace: float = 10.0  # after finalize, before the stop
    kill_after: float = 5.0  # SIGTERM -> SIGKILL
    judge_timeout: float = 3600.0
    seed: int | None = None
    isolation: str = "default"
    pass_env: tuple[str, ...] = ()  # extra operator variables the agent may see
    workers: int | None = None


@dataclass
class AgentOutcome:
    run_id: str
    agent: str
    reason: str
    workspace: Path
    exit_code: int | None = None
    seconds: float = 0.0
    message: str = ""
    candidates: list[str] = field(default_factory=list)
    fallback: bool = False
    selected: str | None = None
    validation_score: float | None = None
    test_score: float | None = None
    run_state: str = "open"

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["workspace"] = str(self.workspace)
        return out


# ---------------------------------------------------------------- preparing


def _run_name(task: str, agent: str) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{task}-{agent}-{stamp}-{secrets.token_hex(2)}"


def _within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _workspace(opts: AgentOptions, data_dir: Path, run_id: str) -> Path:
    if opts.workspace is None:
        where = data_dir.parent / "evopolicy-workspaces" / run_id
    else:
        where = opts.workspace.expanduser().resolve()
    if _within(where, data_dir) or _within(data_dir, where):
        raise AgentError(
            f"workspace {where} overlaps the data directory {data_dir}; the agent must not "
            "see the records: choose a workspace outside it"
        )
    if where.exists() and (not where.is_dir() or any(where.iterdir())):
        raise AgentError(f"workspace {where} exists and is not empty; give a new directory")
    return where


def _server_launch(opts: AgentOptions, data_dir: Path, run_id: str) -> Launch:
    args = ["-m", "evopolicy_mcp", "serve", "--data-dir", str(data_dir)]
    for d in opts.tasks_dirs:
        args += ["--tasks-dir", str(d.expanduser().resolve())]
    args += ["--task", opts.task, "--run", run_id]
    if opts.isolation != "default":
        args += ["--isolation", opts.isolation]
    if opts.workers is not None:
        args += ["--workers", str(opts.workers)]
    return Launch(sys.executable, tuple(args))


def write_files(inv: Invocation) -> None:
    for target, source in inv.overlays.items():
        target.mkdir(parents=True, exist_ok=True)
        written = {p.name for p in inv.files if p.parent == target}
        if source.is_dir():
            for entry in source.iterdir():
                if entry.name not in written:
                    (target / entry.name).symlink_to(entry)
    for path, text in inv.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _open_host(opts: AgentOptions, data_dir: Path, bind: tuple[str, str] | None) -> Host:
    return Host(
        data_dir,
        tasks_dirs=opts.tasks_dirs,
        seed=opts.seed,
        bind=bind,
        workers=opts.workers,
        isolation=Isolation(strict=opts.isolation == "strict"),
    )


def _prepare(
    opts: AgentOptions, provider: Provider, env: dict[str, str], data_dir: Path
) -> tuple[AgentTask, Invocation]:
    """Check everything that can be checked, then create the run and the workspace."""
    run_id = opts.run or _run_name(opts.task, opts.agent)
    workspace = _workspace(opts, data_dir, run_id)
    try:
        host = _open_host(opts, data_dir, (opts.task, run_id))
    except ValueError as exc:  # unknown task, bad or taken run name
        raise AgentError(str(exc)) from None
    try:
        if host.store.get_run(run_id) is not None:
            raise AgentError(f"run {run_id!r} exists already; give a new --run name")
        spec = host.describe_task(opts.task)
        prompt = (
            guide.evolve_policy_prompt(opts.task, spec.summary, guide.budget_line(spec.budget))
            + "\n\n"
            + WORKSPACE_NOTE
            + "\n"
        )
        task = AgentTask(
            task_id=opts.task,
            run_id=run_id,
            workspace=workspace,
            state_dir=workspace / ".agent",
            prompt=prompt,
            server=_server_launch(opts, data_dir, run_id),
            model=opts.model,
            effort=opts.effort,
        )
        try:
            inv = provider.invocation(task, env)
        except Unsupported as exc:
            raise AgentError(str(exc)) from None
        baseline = host.tasks[opts.task].baseline_dir
        host.prepare_run()
    except HostError as exc:
        raise AgentError(exc.message) from None
    finally:
        host.close()
    workspace.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        baseline, workspace / "program", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    (workspace / "TASK.md").write_text(prompt)
    write_files(inv)
    return task, inv


# ---------------------------------------------------------------- the process


class _Pump(threading.Thread):
    """Copy one pipe into a file, keeping at most ``cap`` bytes, draining the rest."""

    def __init__(self, pipe: IO[bytes], path: Path, cap: int = LOG_CAP) -> None:
        super().__init__(name=f"agent-log-{path.name}", daemon=True)
        self.pipe, self.path, self.cap = pipe, path, cap
        self.written = 0
        self.dropped = 0

    def run(self) -> None:
        with self.path.open("wb") as out:
            while chunk := os.read(self.pipe.fileno(), 65536):
                keep = chunk[: max(0, self.cap - self.written)]
                if keep:
                    out.write(keep)
                    out.flush()
                self.written += len(keep)
                self.dropped += len(chunk) - len(keep)
        self.pipe.close()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(proc: subprocess.Popen[bytes], kill_after: float) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL it after ``kill_after`` seconds,
    and wait (bounded) until no process of the group is left."""
    pgid = proc.pid
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGTERM)
        end = time.monotonic() + kill_after
        while time.monotonic() < end and _group_alive(pgid):
            proc.poll()  # reap the leader so it does not count as alive
            time.sleep(0.05)
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)
    proc.wait()
    end = time.monotonic() + GROUP_GONE_SECONDS
    while time.monotonic() < end and _group_alive(pgid):
        time.sleep(0.05)


def _supervise(proc: subprocess.Popen[bytes], store: Store, opts: AgentOptions, run_id: str) -> str:
    """Wait for the agent to finalize (plus grace), exit, or run out of time."""
    deadline = time.monotonic() + opts.timeout
    finalized_at: float | None = None
    while True:
        exited = proc.poll() is not None
        run = store.get_run(run_id)
        if finalized_at is None and run is not None and run.state != "open":
            finalized_at = time.monotonic()
        if finalized_at is not None and (exited or time.monotonic() - finalized_at >= opts.grace):
            return "finalized"
        if exited:
            return "exited" if _attached(store, run_id) else "failed_to_start"
        if time.monotonic() >= deadline:
            return "timed_out"
        time.sleep(POLL_SECONDS)


def _attached(store: Store, run_id: str) -> bool:
    """Whether the agent ever reached its run (start_run, or any submission)."""
    return any(e.kind == "attached" for e in store.events(run_id)) or bool(
        store.list_submissions(run_id)
    )


def _shown_argv(inv: Invocation, prompt: str) -> list[str]:
    return ["<prompt: TASK.md>" if a == prompt else a for a in inv.argv]


def _launch(
    opts: AgentOptions,
    task: AgentTask,
    inv: Invocation,
    env: dict[str, str],
    store: Store,
    log_dir: Path,
) -> tuple[str, int | None, float, str, dict[str, int]]:
    started = time.monotonic()
    store.add_event(
        task.run_id,
        "agent_started",
        {
            "agent": opts.agent,
            "argv": _shown_argv(inv, task.prompt),
            "workspace": str(task.workspace),
            "timeout": opts.timeout,
            "env": sorted(env),
        },
    )
    try:
        proc = subprocess.Popen(
            inv.argv,
            cwd=task.workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        return "failed_to_start", None, 0.0, f"cannot run {inv.argv[0]}: {exc.strerror}", {}
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [
        _Pump(proc.stdout, log_dir / "stdout.jsonl"),
        _Pump(proc.stderr, log_dir / "stderr.log"),
    ]
    for p in pumps:
        p.start()
    try:
        reason = _supervise(proc, store, opts, task.run_id)
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        stop_group(proc, opts.kill_after)
        for p in pumps:
            p.join(GROUP_GONE_SECONDS)
    sizes = {
        "stdout_bytes": pumps[0].written,
        "stderr_bytes": pumps[1].written,
        "dropped_bytes": pumps[0].dropped + pumps[1].dropped,
    }
    message = ""
    if reason == "failed_to_start":
        message = _last_word(log_dir) or f"exit code {proc.returncode}"
    return reason, proc.returncode, time.monotonic() - started, message, sizes


def _wait_for_owners(store: Store, run_id: str, timeout: float = GROUP_GONE_SECONDS) -> None:
    """Wait (bounded) until no live server holds the run's unfinished work, so the host
    that judges can take it over. A server the CLI started outside its process group
    exits once its stdin closes; one still alive after this finishes the work itself."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        run = store.get_run(run_id)
        owners = {s.owner for s in store.list_submissions(run_id) if s.state in PENDING}
        if run is not None and run.state == "finalizing":
            owners.add(run.owner)
        if not any(store.instance_alive(o) for o in owners):
            return
        time.sleep(POLL_SECONDS)


def _last_word(log_dir: Path) -> str:
    """What the CLI last said: its last stderr line, else the ``result``/``error``
    text of its last structured stdout line (a headless CLI reports a failed login
    there)."""
    for name in ("stderr.log", "stdout.jsonl"):
        try:
            lines = (log_dir / name).read_text(errors="replace").strip().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        if name == "stderr.log":
            return lines[-1][:300]
        try:
            last = json.loads(lines[-1])
        except ValueError:
            return lines[-1][:300]
        if isinstance(last, dict):
            for key in ("result", "error", "message"):
                if isinstance(last.get(key), str) and last[key]:
                    return str(last[key])[:300]
    return ""


# ---------------------------------------------------------------- judging


def _fallback(host: Host, run_id: str) -> list[str]:
    """The agent's best complete submissions by public score, for a run it left open."""
    run = host.store.get_run(run_id)
    assert run is not None
    task = Task.model_validate_json(run.task_json)  # the task as the run started
    done = [s for s in host.store.list_submissions(run_id) if s.state == "complete"]
    sign = 1.0 if task.score.direction == "maximize" else -1.0
    done.sort(key=lambda s: (s.score is None, -sign * (s.score or 0.0), -s.ordinal))
    return [s.id for s in done[: task.validation.candidates]]


def _judge(opts: AgentOptions, data_dir: Path, outcome: AgentOutcome) -> None:
    with _open_host(opts, data_dir, None) as host:  # takes over what the server left
        run_id = outcome.run_id
        for sub in host.store.list_submissions(run_id):
            if sub.state in PENDING:
                host.wait(run_id, sub.id, opts.judge_timeout)
        run = host.store.get_run(run_id)
        assert run is not None
        if run.state == "open":
            candidates = _fallback(host, run_id)
            if not candidates:
                outcome.message = (
                    outcome.message or "no complete submission to judge; the run stays open"
                )
                return
            host.finalize(run_id, candidates)
            host.store.add_event(run_id, "fallback_candidates", {"candidates": candidates})
            outcome.fallback = True
        host.wait_final(run_id, opts.judge_timeout)
        report = host.report(run_id)
    outcome.run_state = report.state
    outcome.candidates = list(report.candidates)
    outcome.selected = report.selected
    for row in report.validation:
        if row.submission_id == report.selected:
            outcome.validation_score = row.score
    if report.assessment is not None:
        outcome.test_score = report.assessment.score


# ---------------------------------------------------------------- entry point


def run_agent(opts: AgentOptions) -> AgentOutcome:
    """Launch ``opts.agent`` on a new run of ``opts.task``, stop it, judge the run."""
    provider = PROVIDERS.get(opts.agent)
    if provider is None:
        raise AgentError(f"unknown agent {opts.agent!r}; choose one of {', '.join(PROVIDERS)}")
    if opts.timeout <= 0:
        raise AgentError("--timeout must be a positive number of seconds")
    env = allowed_env(provider, os.environ, opts.pass_env)
    problem = provider.preflight(env)
    if problem:
        raise AgentError(problem)
    data_dir = opts.data_dir.expanduser().resolve()
    task, inv = _prepare(opts, provider, env, data_dir)
    env = {**env, **inv.env}
    store = Store(data_dir)
    try:
        log_dir = store.run_dir(task.run_id) / "agent"
        log_dir.mkdir(parents=True, exist_ok=True)
        reason, code, seconds, message, sizes = _launch(opts, task, inv, env, store, log_dir)
        _wait_for_owners(store, task.run_id)
        store.add_event(
            task.run_id,
            "agent_ended",
            {"agent": opts.agent, "reason": reason, "exit_code": code, "seconds": seconds, **sizes},
        )
    finally:
        store.close()
    outcome = AgentOutcome(
        run_id=task.run_id,
        agent=opts.agent,
        reason=reason,
        workspace=task.workspace,
        exit_code=code,
        seconds=round(seconds, 3),
        message=message,
    )
    if reason != "interrupted":
        _judge(opts, data_dir, outcome)
    return outcome
