"""The launcher: one agent CLI, headless, against one run of a task.

Steps, the same for every provider:

1. Create the run host-side (budget from the task) and a fresh workspace:
   ``program/`` seeded with the task's baseline, ``TASK.md`` with the prompt,
   and the CLI's MCP config pointing at the run's server (:mod:`.endpoint`).
2. Start that server: its own process and session, outside the agent's
   reach, on a loopback endpoint only the run's token opens.
3. Start the CLI confined (:mod:`.confine`, :mod:`.jail`) in its own session,
   stdin closed, with the allowlisted environment only; copy its stdout and
   stderr (bounded) into the run record, with how it was confined.
4. Stop it (SIGTERM, then SIGKILL of the whole session) once the run is
   finalized and a short grace has passed, or when the time is up; then stop
   the server.
5. Judge as usual (:mod:`.judging`).

In a sweep, step 2 is the sweep's: one server for all its runs, each run's
token bound to that run and its workspace (:class:`.endpoint.SharedRun`);
step 4 leaves that server running.

The terminal reason is one of :data:`REASONS`.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from evopolicy_mcp.agents.config import Remote
from evopolicy_mcp.host import guide
from evopolicy_mcp.host.authority import HostError
from evopolicy_mcp.store.database import PENDING, Store, StoreError

from . import claude, codex, kimi, qoder, scripted
from .base import AgentTask, Invocation, Provider, Unsupported, allowed_env
from .confine import ConfineError, Jail, Reach, check_mode, hidden_paths, jail_for
from .endpoint import RunServer, ServerError, SharedRun
from .judging import JUDGE_FAULTS, judge, judge_run, open_host
from .outcome import REASONS, AgentError, AgentOptions, AgentOutcome, executor_problem
from .procs import GONE_SECONDS, Pump, blocked_signals, signals_interrupt, stop_session

__all__ = [
    "PROVIDERS",
    "REASONS",
    "AgentError",
    "AgentOptions",
    "AgentOutcome",
    "judge_run",
    "run_agent",
    "workspace_for",
    "write_files",
]

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (claude.PROVIDER, codex.PROVIDER, kimi.PROVIDER, qoder.PROVIDER, scripted.PROVIDER)
}
POLL_SECONDS = 0.2
# A server left outside the CLI's session gets this long to let go of the run's work;
# longer than a host's own shutdown limit (Host.close_timeout, 10 s).
OWNER_GONE_SECONDS = 30.0
WORKSPACE_NOTE = (
    "Your workspace is the current directory. `program/` holds the task's baseline "
    "program; edit it there and submit it with `program_dir` set to that directory's "
    "absolute path (or pass the files inline). These instructions are also in TASK.md."
)


# ---------------------------------------------------------------- preparing


def _run_name(task: str, agent: str) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    # A family task's id has a slash (minigrid/doorkey-8x8); a run name has none.
    return f"{task.replace('/', '.')}-{agent}-{stamp}-{secrets.token_hex(2)}"


def _within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def workspace_for(opts: AgentOptions, data_dir: Path, run_id: str) -> Path:
    """The run's workspace (checked: outside the records, new or empty), or AgentError."""
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


def write_files(inv: Invocation) -> None:
    for target, source in inv.overlays.items():
        target.mkdir(parents=True, exist_ok=True)
        written = {p.name for p in inv.files if p.parent == target}
        if source.is_dir():
            for entry in source.iterdir():
                if entry.name not in written:
                    (target / entry.name).symlink_to(entry)
    for path, text in inv.files.items():  # they may hold the run's token: the owner's only
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(text)


def _prepare(
    opts: AgentOptions,
    provider: Provider,
    env: dict[str, str],
    data_dir: Path,
    run_id: str,
    server: Remote,
) -> tuple[AgentTask, Invocation]:
    """Check everything that can be checked, write the workspace, then create the run.
    On any failure nothing is left: no run, and no workspace this call created."""
    workspace = workspace_for(opts, data_dir, run_id)
    try:
        host = open_host(opts, data_dir, (opts.task, run_id), resume=False, episodes=False)
    except (ValueError, StoreError, OSError) as exc:  # unknown task, bad run name or data dir
        raise AgentError(str(exc)) from None
    created = not workspace.exists()
    try:
        if host.store.get_run(run_id) is not None:
            raise AgentError(f"run {run_id!r} exists already; give a new --run name")
        host.describe_task(opts.task)  # refuses a task whose environment is unavailable
        info = host.task_info(opts.task)
        prompt = (
            guide.evolve_policy_prompt(opts.task, info.summary, guide.budget_line(info.budget))
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
            server=server,
            model=opts.model,
            effort=opts.effort,
        )
        inv = provider.invocation(task, env)
        workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copytree(
            host.tasks[opts.task].baseline_dir,
            workspace / "program",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        (workspace / "TASK.md").write_text(prompt)
        write_files(inv)
        host.prepare_run()
    except BaseException as exc:
        if workspace.is_dir():
            if created:
                shutil.rmtree(workspace, ignore_errors=True)
            else:  # it was given empty: leave it empty
                for entry in workspace.iterdir():
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink(missing_ok=True)
        if isinstance(exc, Unsupported):
            raise AgentError(str(exc)) from None
        if isinstance(exc, HostError):
            raise AgentError(exc.message) from None
        if isinstance(exc, OSError):
            raise AgentError(f"cannot write the workspace {workspace}: {exc}") from None
        raise
    finally:
        host.close()
    return task, inv


# ---------------------------------------------------------------- the process


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


@dataclass
class _Ended:
    reason: str
    exit_code: int | None = None
    seconds: float = 0.0
    message: str = ""


def _launch(
    opts: AgentOptions,
    task: AgentTask,
    inv: Invocation,
    env: dict[str, str],
    store: Store,
    log_dir: Path,
    jail: Jail,
    server: RunServer | SharedRun,
) -> _Ended:
    """Start the run's server, run the CLI to its end or its stop, stop the server;
    record ``agent_started`` (with how the agent is confined, and where its episodes
    run) and ``agent_ended``."""
    shared = "shared by the sweep's runs, " if server.shared else ""
    started_detail = {
        "agent": opts.agent,
        "model": opts.model,
        "effort": opts.effort,
        "argv": _shown_argv(inv, task.prompt),
        "workspace": str(task.workspace),
        "timeout": opts.timeout,
        "env": sorted(env),
        "confinement": jail.record,
        "server": f"{server.url} ({shared}its own process and session; bearer token)",
        "server_pid": server.pid,
        "executor": {
            "name": opts.executor,
            "workers": opts.workers,
            "ray_address": opts.ray_address,
            "shared": bool(server.shared),
        },
    }
    started = time.monotonic()
    try:
        try:
            server.start(log_dir)
        finally:
            started_detail["server_pid"] = server.pid
            store.add_event(task.run_id, "agent_started", started_detail)
        with jail.command(inv.argv) as (argv, fds):
            proc = subprocess.Popen(
                argv,
                cwd=task.workspace,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                pass_fds=fds,
            )
    except (OSError, ServerError, KeyboardInterrupt) as exc:
        with blocked_signals():
            server.stop()
            if isinstance(exc, KeyboardInterrupt):  # while the server was starting
                ended = _Ended("interrupted", seconds=round(time.monotonic() - started, 3))
            elif isinstance(exc, ServerError):
                ended = _Ended("failed_to_start", message=f"the run's server did not start: {exc}")
            else:
                ended = _Ended(
                    "failed_to_start", message=f"cannot run {inv.argv[0]}: {exc.strerror}"
                )
            store.add_event(task.run_id, "agent_ended", {"agent": opts.agent, **ended.__dict__})
        return ended
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [Pump(proc.stdout, log_dir / "stdout.jsonl"), Pump(proc.stderr, log_dir / "stderr.log")]
    for p in pumps:
        p.start()
    ended = _Ended("interrupted")
    try:
        ended.reason = _supervise(proc, store, opts, task.run_id)
    except KeyboardInterrupt:
        pass
    finally:
        with blocked_signals():  # a second Ctrl-C must not leave the CLI running
            stop_session(proc, opts.kill_after)
            for p in pumps:
                p.join(GONE_SECONDS)
            ended.exit_code = proc.returncode
            ended.seconds = round(time.monotonic() - started, 3)
            if ended.reason == "failed_to_start":
                ended.message = _last_word(log_dir) or f"exit code {proc.returncode}"
            server.stop()
            if not server.shared:  # a shared server goes on with the run's work
                _wait_for_owners(store, task.run_id)
            store.add_event(
                task.run_id,
                "agent_ended",
                {
                    "agent": opts.agent,
                    **ended.__dict__,
                    "stdout_bytes": pumps[0].written,
                    "stderr_bytes": pumps[1].written,
                    "dropped_bytes": pumps[0].dropped + pumps[1].dropped,
                },
            )
    return ended


def _wait_for_owners(store: Store, run_id: str, timeout: float = OWNER_GONE_SECONDS) -> None:
    """Wait (bounded) until no live server holds the run's pending submissions, so the
    host that judges can take them over (the run's server is stopped by then; one still
    alive after this finishes the work itself). A finalized run's judging is not waited
    for: its own process holds it, and judging waits for it (``Host.finish``)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        owners = {s.owner for s in store.list_submissions(run_id) if s.state in PENDING}
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


# ---------------------------------------------------------------- entry point


def _find(provider: Provider, env: dict[str, str]) -> str:
    """The CLI on the agent's PATH; AgentError (nothing created) when it is missing."""
    if provider.name == "scripted":
        return provider.executable
    found = shutil.which(provider.executable, path=env.get("PATH"))
    if found is None:
        raise AgentError(
            f"{provider.executable} is not on PATH; install it ({provider.package}) "
            "or put its directory on PATH"
        )
    return found


def run_agent(opts: AgentOptions, shared: SharedRun | None = None) -> AgentOutcome:
    """Launch ``opts.agent`` on a new run of ``opts.task``, stop it, judge the run.

    Bad input raises :class:`AgentError` before anything is created. Once the run
    exists, every outcome (including a fault while judging) is returned, and the
    CLI's whole session is stopped whatever happens, SIGTERM to the launcher too.
    With ``shared`` (a sweep's server, its token bound to this run and to
    ``opts.workspace``) no server of its own is started."""
    provider = PROVIDERS.get(opts.agent)
    if provider is None:
        raise AgentError(f"unknown agent {opts.agent!r}; choose one of {', '.join(PROVIDERS)}")
    if opts.timeout <= 0:
        raise AgentError("--timeout must be a positive number of seconds")
    env = allowed_env(provider, os.environ, opts.pass_env)
    problem = provider.preflight(env)
    if problem:
        raise AgentError(problem)
    executable = _find(provider, env)
    problem = executor_problem(opts.executor)
    if problem:
        raise AgentError(problem)
    try:
        check_mode(opts.confine)
    except ConfineError as exc:
        raise AgentError(str(exc)) from None
    data_dir = opts.data_dir.expanduser().resolve()
    run_id = opts.run or _run_name(opts.task, opts.agent)
    server = shared or RunServer(
        data_dir,
        tasks_dirs=opts.tasks_dirs,
        task=opts.task,
        run=run_id,
        isolation=opts.isolation,
        workers=opts.workers,
        executor=opts.executor,
        ray_address=opts.ray_address,
    )
    with signals_interrupt():
        store: Store | None = None
        jail: Jail | None = None
        try:
            # A stop that comes while the run is made is taken once it exists, here, so
            # that the run always records why its agent ended (here: before it started).
            with blocked_signals():
                task, inv = _prepare(opts, provider, env, data_dir, run_id, server.bind())
                server.program_root = task.workspace  # program_dir: the agent's workspace only
                hidden = hidden_paths(data_dir, opts.tasks_dirs)
                reach = Reach(task.workspace, executable, provider.config_paths(env), hidden)
                jail = jail_for(opts.confine, reach, env)
                store = Store(data_dir)
            log_dir = store.run_dir(task.run_id) / "agent"
            log_dir.mkdir(parents=True, exist_ok=True)
            run_env = {**env, **inv.env, **jail.env}
            ended = _launch(opts, task, inv, run_env, store, log_dir, jail, server)
        except KeyboardInterrupt:
            if store is None:
                raise
            ended = _Ended("interrupted")
            if not any(e.kind == "agent_ended" for e in store.events(task.run_id)):
                store.add_event(task.run_id, "agent_ended", {"agent": opts.agent, **ended.__dict__})
        finally:
            server.stop()
            if jail is not None:
                jail.close()
            if store is not None:
                store.close()
        outcome = AgentOutcome(
            run_id=task.run_id,
            agent=opts.agent,
            reason=ended.reason,
            workspace=task.workspace,
            exit_code=ended.exit_code,
            seconds=ended.seconds,
            message=ended.message,
            confinement=jail.record if jail is not None else {},
        )
        if ended.reason != "interrupted":
            try:
                judge(opts, data_dir, outcome, shared)
            except JUDGE_FAULTS as exc:
                outcome.message = f"judging stopped: {getattr(exc, 'message', None) or exc}"
    return outcome
