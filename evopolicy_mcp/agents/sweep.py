"""Sweeps: agents x tasks x repeats as independent runs, recorded as one experiment.

Each cell (one agent on one task, one repeat) is one run through the launcher
(:func:`~.launch.run_agent`), in a process of its own (``python -m
evopolicy_mcp.agents.sweep --cell ...``), at most ``parallel`` at once. All of
them are served by one server process the sweep starts (``serve
--clients-from-stdin``): its one executor, and its dispatcher, share the
workers fairly between the runs going at once (with ``--executor process``, N
workers in all, not N per run). Each run's agent gets a token of its own,
bound to that run and its workspace only, and released when its session is
over (:mod:`.endpoint`). The experiment record (:mod:`evopolicy_mcp.store.experiments`) holds the
configuration and each cell's run ids; what became of a run is read from the
records, so a sweep can be stopped or killed at any moment and resumed:

- a run that is finalized is done and never redone;
- a run whose agent session ended (it finalized, exited or timed out) but
  whose judging did not finish is judged now;
- a run whose session was cut short (the sweep was stopped, or died: its
  cells get SIGTERM when it does) is abandoned, and the cell starts a new
  attempt; the abandoned run stays in the records, marked ``interrupted``.

With ``seed``, repeat ``r`` of every agent and task uses the same hidden
episodes (the run seed derives from the sweep seed and ``r``), so agents are
compared on matched episodes.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evopolicy_mcp.kernel.confine import PR_SET_PDEATHSIG, prctl
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.experiments import (
    Cell,
    ExperimentRecord,
    experiment_lock,
    read_experiment,
    write_experiment,
)
from evopolicy_mcp.store.records import StoreError
from evopolicy_mcp.tasks.model import load_tasks, task_family

from .base import allowed_env
from .endpoint import RunServer, ServerError, SharedRun
from .launch import PROVIDERS, AgentError, AgentOptions, judge_run, run_agent, workspace_for
from .outcome import executor_problem
from .procs import signals_interrupt

__all__ = ["AgentSpec", "SweepConfig", "SweepError", "parse_agents", "plan_cells", "sweep"]

POLL_SECONDS = 0.2
SHARED_VARIABLE = "EVOPOLICY_SWEEP_RUN"  # a cell's place on the sweep's server: URL, token, pid
STOP_SECONDS = 60.0  # a stopped cell gets this long to stop its agent and record it
_SLUG = re.compile(r"[^A-Za-z0-9_-]+")


class SweepError(Exception):
    """Bad input to a sweep (nothing was started): one line."""


@dataclass(frozen=True)
class AgentSpec:
    agent: str
    model: str | None = None
    effort: str | None = None

    @property
    def label(self) -> str:
        return ":".join([self.agent, self.model or "", self.effort or ""]).rstrip(":")


def parse_agents(text: str) -> list[AgentSpec]:
    """``claude:MODEL[:EFFORT],codex:MODEL,scripted`` -> specs, checked against the providers."""
    specs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, rest = item.partition(":")
        model, _, effort = rest.partition(":")
        if name not in PROVIDERS:
            raise SweepError(f"unknown agent {name[:40]!r}; choose from {', '.join(PROVIDERS)}")
        if name == "scripted" and (model or effort):
            raise SweepError("the scripted agent takes no model or effort: write just 'scripted'")
        specs.append(AgentSpec(name, model or None, effort or None))
    if not specs:
        raise SweepError("--agents names no agent; e.g. --agents scripted,claude:MODEL")
    if len({s.label for s in specs}) != len(specs):
        raise SweepError("--agents names the same agent twice")
    return specs


@dataclass(frozen=True)
class SweepConfig:
    agents: tuple[AgentSpec, ...]
    tasks: tuple[str, ...]
    repeat: int = 1
    timeout: float = 3600.0
    seed: int | None = None
    isolation: str = "default"
    workers: int | None = None
    executor: str = "thread"  # the sweep's one server runs every run's episodes there
    ray_address: str | None = None
    trace_all: bool = False
    trace_steps: int | None = None
    finish: str | None = None
    storage_mb: float | None = None
    tasks_dirs: tuple[str, ...] = ()
    pass_env: tuple[str, ...] = ()
    confine: str = "default"  # every agent's sandbox: default, strict or off

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepConfig:
        data = dict(data)
        data["agents"] = tuple(AgentSpec(**a) for a in data["agents"])
        for key in ("tasks", "tasks_dirs", "pass_env"):
            data[key] = tuple(data.get(key, ()))
        return cls(**data)


def resolve_tasks(
    ids: list[str] | None, family: str | None, tasks_dirs: tuple[str, ...]
) -> tuple[str, ...]:
    tasks = load_tasks(tasks_dirs)
    if family is not None:
        chosen = [t.id for t in tasks.values() if task_family(t) == family]
        if not chosen:
            known = sorted({task_family(t) for t in tasks.values()})
            raise SweepError(f"no task in family {family[:40]!r}; families: {', '.join(known)}")
        return tuple(chosen)
    unknown = [t for t in ids or [] if t not in tasks]
    if unknown:
        raise SweepError(f"unknown task {unknown[0][:60]!r}; `evopolicy-mcp tasks` lists them")
    if not ids:
        raise SweepError("give --tasks ID,ID or --family F")
    return tuple(dict.fromkeys(ids))


def plan_cells(config: SweepConfig) -> list[Cell]:
    """The cross product, repeat-major so that stopping early leaves whole repeats."""
    return [
        Cell(task=t, agent=a.agent, model=a.model, effort=a.effort, repeat=r)
        for r in range(1, config.repeat + 1)
        for t in config.tasks
        for a in config.agents
    ]


def _run_id(name: str, cell: Cell, attempt: int) -> str:
    label = AgentSpec(cell.agent, cell.model, cell.effort).label
    suffix = f".r{cell.repeat}" + (f".a{attempt}" if attempt > 1 else "")
    readable = f"{name}.{_SLUG.sub('-', cell.task)}.{_SLUG.sub('-', label)}{suffix}"
    if len(readable) <= 64:
        return readable
    digest = hashlib.sha256(repr(cell.key[:4]).encode()).hexdigest()[:10]
    return f"{name}.{digest}{suffix}"


def _cell_seed(seed: int | None, repeat: int) -> int | None:
    if seed is None:
        return None
    return int.from_bytes(hashlib.sha256(f"sweep:{seed}:{repeat}".encode()).digest()[:6], "big")


def _options(config: SweepConfig, cell: Cell, data_dir: Path, run_id: str) -> AgentOptions:
    return AgentOptions(
        agent=cell.agent,
        task=cell.task,
        data_dir=data_dir,
        tasks_dirs=tuple(Path(d) for d in config.tasks_dirs),
        run=run_id,
        model=cell.model,
        effort=cell.effort,
        timeout=config.timeout,
        seed=_cell_seed(config.seed, cell.repeat),
        isolation=config.isolation,
        pass_env=config.pass_env,
        workers=config.workers,
        executor=config.executor,
        ray_address=config.ray_address,
        trace_all=config.trace_all,
        trace_steps=config.trace_steps,
        finish=config.finish,
        storage_mb=config.storage_mb,
        confine=config.confine,
    )


# ------------------------------------------------------------ a cell's state


def _next_step(store: Store, cell: Cell) -> str:
    """``done``, ``judge`` (the last attempt needs only judging) or ``launch``."""
    if not cell.attempts:
        return "launch"
    run = store.get_run(cell.attempts[-1])
    if run is None:
        return "launch"
    if run.state == "finalized":
        return "done"
    ended = next((e for e in reversed(store.events(run.id)) if e.kind == "agent_ended"), None)
    if ended is not None and ended.detail.get("reason") != "interrupted":
        # An agent session that ended by itself: judge it, once (a run left open with no
        # complete submission stays open; that is its result).
        judged = any(e.kind == "sweep_judged" for e in store.events(run.id))
        return "done" if judged and run.state == "open" else "judge"
    if run.state == "finalizing":
        return "judge"  # the agent finalized before the session was cut
    return "launch"


# ------------------------------------------------------------ the sweep


@dataclass
class CellResult:
    cell: Cell
    run_id: str
    outcome: dict[str, Any]


def sweep(
    name: str,
    config: SweepConfig | None,
    data_dir: Path,
    *,
    parallel: int = 1,
    say: Callable[[str], None] = print,
) -> tuple[ExperimentRecord, list[CellResult], bool]:
    """Run (or resume) experiment ``name``; ``config`` None resumes it as recorded.
    Returns the record, what this call ran, and whether every cell is done."""
    data_dir = data_dir.expanduser().resolve()
    existing = read_experiment(data_dir, name)
    if config is None:
        if existing is None:
            raise SweepError(f"no experiment {name!r} in {data_dir}; start it with --agents")
        config = SweepConfig.from_dict(existing.config)
    elif existing is not None and SweepConfig.from_dict(existing.config) != config:
        # (read through the class: a record from before a field existed has its default)
        raise SweepError(
            f"experiment {name!r} exists with another configuration; resume it with "
            f"`agent sweep --resume {name}` or choose a new --experiment name"
        )
    problem = executor_problem(config.executor)
    if problem:
        raise SweepError(problem)
    env = os.environ
    for spec in config.agents:
        problem = PROVIDERS[spec.agent].preflight(allowed_env(PROVIDERS[spec.agent], env, ()))
        if problem:
            raise SweepError(f"{spec.agent}: {problem}")
    with experiment_lock(data_dir, name):
        record = existing or ExperimentRecord(
            name, time.time(), config.to_dict(), plan_cells(config)
        )
        write_experiment(data_dir, record)
        results = _work(record, config, data_dir, max(1, parallel), say)
        store = Store(data_dir)
        try:
            complete = all(_next_step(store, c) == "done" for c in record.cells)
        finally:
            store.close()
    return record, results, complete


def _work(
    record: ExperimentRecord,
    config: SweepConfig,
    data_dir: Path,
    parallel: int,
    say: Callable[[str], None],
) -> list[CellResult]:
    logs = data_dir / "experiments" / record.name / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    store = Store(data_dir)
    running: dict[subprocess.Popen[bytes], tuple[Cell, str, Path, str | None]] = {}
    results: list[CellResult] = []
    todo = list(record.cells)
    total = len(todo)
    server: RunServer | None = None
    try:
        with signals_interrupt():
            server = _serve(config, data_dir, logs)
            while todo or running:
                while todo and len(running) < parallel:
                    cell = todo.pop(0)
                    step = _next_step(store, cell)
                    if step == "done":
                        continue
                    if step == "launch":
                        cell.attempts.append(_run_id(record.name, cell, len(cell.attempts) + 1))
                        write_experiment(data_dir, record)  # before the run can exist
                    run_id = cell.attempts[-1]
                    opts = _options(config, cell, data_dir, run_id)
                    shared = None
                    if step == "launch":
                        try:
                            opts, shared = _admit(server, opts, data_dir)
                        except (AgentError, ServerError, OSError) as exc:
                            results.append(CellResult(cell, run_id, {"error": str(exc)[:300]}))
                            say(f"  {run_id}: error: {str(exc)[:300]}")
                            continue
                    outcome_file = logs / f"{run_id}.outcome.json"
                    outcome_file.unlink(missing_ok=True)
                    proc = _start(opts, step, outcome_file, logs / f"{run_id}.log", shared)
                    running[proc] = (cell, run_id, outcome_file, shared.token if shared else None)
                    say(f"[{total - len(todo)}/{total}] {step} {run_id}")
                for proc in [p for p in running if p.poll() is not None]:
                    cell, run_id, outcome_file, token = running.pop(proc)
                    if token is not None:
                        server.release(token)  # its session is over: the token opens nothing
                    outcome = _read_outcome(outcome_file, proc.returncode)
                    if outcome.get("reason") not in (None, "interrupted"):
                        store.add_event(run_id, "sweep_judged", {"experiment": record.name})
                    results.append(CellResult(cell, run_id, outcome))
                    say(f"  {run_id}: {_describe(outcome)}")
                time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        say(
            f"stopping {len(running)} run(s); resume with: evopolicy-mcp agent sweep --resume {record.name}"
        )
        _stop(list(running))
        raise
    finally:
        if server is not None:
            server.stop()
        store.close()
    return results


def _serve(config: SweepConfig, data_dir: Path, logs: Path) -> RunServer:
    """The sweep's one server, started; SweepError if it does not start."""
    server = RunServer(
        data_dir,
        tasks_dirs=tuple(Path(d) for d in config.tasks_dirs),
        isolation=config.isolation,
        workers=config.workers,
        executor=config.executor,
        ray_address=config.ray_address,
        shared=True,
    )
    try:
        server.start(logs)
    except ServerError as exc:
        raise SweepError(f"the sweep's server did not start: {exc}") from None
    return server


def _admit(server: RunServer, opts: AgentOptions, data_dir: Path) -> tuple[AgentOptions, SharedRun]:
    """The run's workspace (made empty, the owner's only) and its place on the server: a
    token bound to that run and that workspace."""
    assert opts.run is not None and server.pid is not None
    workspace = workspace_for(opts, data_dir, opts.run)
    workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        token = server.admit(opts.task, opts.run, workspace)
    except ServerError:
        if not any(workspace.iterdir()):
            workspace.rmdir()
        raise
    return dataclasses.replace(opts, workspace=workspace), SharedRun(server.url, token, server.pid)


def _start(
    opts: AgentOptions, step: str, outcome: Path, log: Path, shared: SharedRun | None
) -> subprocess.Popen[bytes]:
    options = {
        **{f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)},
        "data_dir": str(opts.data_dir),
        "tasks_dirs": [str(d) for d in opts.tasks_dirs],
        "workspace": str(opts.workspace) if opts.workspace is not None else None,
    }
    env = dict(os.environ)
    env.pop(SHARED_VARIABLE, None)
    if shared is not None:  # the token in the environment: /proc/PID/environ is the owner's
        env[SHARED_VARIABLE] = json.dumps([shared.url, shared.token, shared.pid])
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evopolicy_mcp.agents.sweep",
                "--cell",
                json.dumps(options),
                "--step",
                step,
                "--outcome",
                str(outcome),
                "--parent",
                str(os.getpid()),
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    end = time.monotonic() + STOP_SECONDS
    for p in procs:
        try:
            p.wait(max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _read_outcome(path: Path, code: int | None) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {"error": "unreadable outcome"}
    except (OSError, ValueError):
        return {"error": f"the cell's process ended (exit code {code}) without an outcome"}


def _describe(o: dict[str, Any]) -> str:
    if "error" in o:
        return f"error: {o['error']}"
    text = f"{o.get('reason')}, run {o.get('run_state')}"
    if o.get("test_score") is not None:
        text += f", assessment {o['test_score']:.4g}"
    return text + (f" ({o['message']})" if o.get("message") else "")


# ------------------------------------------------------------ one cell, in its own process


def _cell_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="evopolicy_mcp.agents.sweep")
    parser.add_argument("--cell", required=True)
    parser.add_argument("--step", choices=("launch", "judge"), required=True)
    parser.add_argument("--outcome", type=Path, required=True)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(argv)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the sweep died: stop like Ctrl-C
    if os.getppid() != args.parent:
        return 1  # it died before the line above
    shared = _shared_run(os.environ.pop(SHARED_VARIABLE, None))
    data = json.loads(args.cell)
    data["data_dir"] = Path(data["data_dir"])
    data["tasks_dirs"] = tuple(Path(d) for d in data["tasks_dirs"])
    data["pass_env"] = tuple(data["pass_env"])
    data["workspace"] = Path(data["workspace"]) if data.get("workspace") else None
    opts = AgentOptions(**data)
    try:
        if args.step == "judge":
            assert opts.run is not None
            outcome = judge_run(opts, opts.run).as_dict()
        else:
            outcome = run_agent(opts, shared).as_dict()
    except (AgentError, StoreError, OSError) as exc:
        outcome = {"error": str(exc)[:300]}
    args.outcome.write_text(json.dumps(outcome))
    return 0


def _shared_run(text: str | None) -> SharedRun | None:
    if not text:
        return None
    url, token, pid = json.loads(text)
    return SharedRun(str(url), str(token), int(pid))


if __name__ == "__main__":
    sys.exit(_cell_main(sys.argv[1:]))
