"""``evopolicy-mcp agent run`` and ``evopolicy-mcp agent check``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evopolicy_mcp.agents.confine import confinement_line
from evopolicy_mcp.agents.launch import (
    PROVIDERS,
    REASONS,
    AgentError,
    AgentOptions,
    AgentOutcome,
    run_agent,
)
from evopolicy_mcp.cli.options import add_run_arguments, positive_int, run_rule_arguments
from evopolicy_mcp.store.database import StoreError, default_data_dir
from evopolicy_mcp.tasks.model import TaskError

__all__ = ["add_agent_arguments", "cmd_agent"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"want a positive number of seconds, got {text!r}")
    return value


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="agent_command", required=True, metavar="{run,check,sweep}")
    names = tuple(PROVIDERS)

    run = sub.add_parser(
        "run",
        help="run an agent CLI headless on a new run of a task, then judge the run",
        description="Create a run and a workspace, launch the agent CLI against a server "
        "bound to the run, stop it when it finalizes or the time is up, then run "
        "validation and assessment. Terminal reasons: "
        + "; ".join(f"{k}: {v}" for k, v in REASONS.items()),
    )
    run.add_argument("--agent", required=True, choices=names)
    run.add_argument("--task", required=True, help="task id (see `evopolicy-mcp tasks`)")
    run.add_argument("--model", help="model name passed to the CLI")
    run.add_argument("--effort", help="reasoning effort passed to the CLI (Claude, Codex, Qoder)")
    run.add_argument(
        "--timeout", type=_seconds, default=3600.0, help="wall-clock limit of the agent (s)"
    )
    run.add_argument(
        "--grace",
        type=_seconds,
        default=10.0,
        help="seconds the agent may keep running after it finalized (default 10)",
    )
    run.add_argument(
        "--workspace",
        type=Path,
        help="new or empty directory for the agent (default: beside the data directory)",
    )
    run.add_argument("--run", help="name of the new run (default: TASK-AGENT-TIME-XXXX)")
    run.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="also pass this variable of yours to the agent (repeatable; NAME* for a prefix)",
    )
    run.add_argument("--seed", type=int, default=None, help="seed the run's hidden episodes")
    add_run_arguments(run, "run the agent's policies")
    _confine_arguments(run)
    run.add_argument("--json", action="store_true", help="print the outcome as JSON")
    _tracing(run)
    run_rule_arguments(run)
    _common(run)
    add_sweep_arguments(sub)

    check = sub.add_parser(
        "check", help="is the CLI installed, its version, can it reach the server"
    )
    check.add_argument("--agent", required=True, choices=names)
    _confine_arguments(check)
    check.add_argument("--json", action="store_true")
    _common(check, data=False)


def _tracing(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace-all",
        action="store_true",
        help="dataset-building runs: trace every training episode (step traces, and files such "
        "as replays where the environment saves them; docs/results.md states the disk cost)",
    )
    p.add_argument(
        "--trace-steps",
        type=positive_int,
        default=None,
        metavar="N",
        help="steps kept per traced episode (default: the task's)",
    )


def add_sweep_arguments(sub: argparse._SubParsersAction) -> None:
    sweep = sub.add_parser(
        "sweep",
        help="run agents x tasks x repeats as one experiment, resumable",
        description="Run every agent on every task, --repeat times, each as its own run "
        "through `agent run`, recorded as one experiment. One server serves every run "
        "going at once (its executor shares the workers fairly between them; each agent's "
        "token reaches its own run and workspace only). Stopped or killed, it resumes "
        "with --resume NAME: finished runs are not redone.",
    )
    sweep.add_argument(
        "--agents",
        help="comma-separated CLI[:MODEL[:EFFORT]], e.g. claude:sonnet,codex:gpt-5,scripted",
    )
    what = sweep.add_mutually_exclusive_group()
    what.add_argument("--tasks", help="comma-separated task ids")
    what.add_argument("--family", help="every task of a family (see `evopolicy-mcp tasks`)")
    sweep.add_argument("--repeat", type=positive_int, default=1, help="runs per agent and task")
    sweep.add_argument("--parallel", type=positive_int, default=1, help="runs at once")
    sweep.add_argument("--experiment", help="name of the experiment (default: sweep-TIME)")
    sweep.add_argument("--resume", metavar="NAME", help="resume experiment NAME as it was set")
    sweep.add_argument(
        "--timeout", type=_seconds, default=3600.0, help="wall-clock limit of each agent (s)"
    )
    sweep.add_argument(
        "--seed",
        type=int,
        default=None,
        help="repeat r of every agent and task plays the same hidden episodes",
    )
    add_run_arguments(sweep, "run the agents' policies")
    sweep.add_argument("--pass-env", action="append", default=[], metavar="NAME")
    _confine_arguments(sweep)
    sweep.add_argument("--json", action="store_true", help="print the results as JSON")
    _tracing(sweep)
    run_rule_arguments(sweep)
    _common(sweep)


def _confine_arguments(p: argparse.ArgumentParser) -> None:
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--confine",
        choices=("default", "strict"),
        default="default",
        help="the agent CLI's sandbox: every layer this machine gives (default), or strict: "
        "refuse to start when one is missing (see `evopolicy-mcp doctor`)",
    )
    how.add_argument(
        "--no-confine",
        dest="confine",
        action="store_const",
        const="off",
        help="run the agent CLI unconfined; the run's record and report say so",
    )


def _common(p: argparse.ArgumentParser, *, data: bool = True) -> None:
    if data:
        p.add_argument("--data-dir", type=Path, help="records directory (default: per user)")
    p.add_argument("--tasks-dir", action="append", type=Path, default=[], metavar="DIR")


def _print_outcome(o: AgentOutcome) -> None:
    print(f"run {o.run_id}: {o.reason} ({REASONS[o.reason]}) after {o.seconds:.1f} s")
    if o.message:
        print(f"  {o.message}")
    print(f"  workspace: {o.workspace}")
    print(f"  agent: {confinement_line(o.confinement)}")
    if o.candidates:
        note = " (fallback: the agent did not finalize)" if o.fallback else ""
        print(f"  candidates: {', '.join(o.candidates)}{note}")
    if o.selected:
        print(f"  selected: {o.selected}  validation: {o.validation_score}  test: {o.test_score}")
    print(f"  run state: {o.run_state}; details: evopolicy-mcp report {o.run_id}")


def cmd_sweep(args: argparse.Namespace) -> int:
    import time

    from evopolicy_mcp.agents.sweep import (
        SweepConfig,
        SweepError,
        parse_agents,
        resolve_tasks,
        sweep,
    )

    data_dir = args.data_dir or default_data_dir()
    try:
        if args.resume:
            name, config = args.resume, None
        else:
            if not args.agents:
                raise SweepError("give --agents (or --resume NAME)")
            name = args.experiment or time.strftime("sweep-%Y%m%d-%H%M%S")
            config = SweepConfig(
                agents=tuple(parse_agents(args.agents)),
                tasks=resolve_tasks(
                    args.tasks.split(",") if args.tasks else None,
                    args.family,
                    tuple(map(str, args.tasks_dir)),
                ),
                repeat=args.repeat,
                timeout=args.timeout,
                seed=args.seed,
                isolation=args.isolation,
                workers=args.workers,
                executor=args.executor,
                ray_address=args.ray_address,
                trace_all=args.trace_all,
                trace_steps=args.trace_steps,
                finish=args.finish,
                storage_mb=args.storage_mb,
                tasks_dirs=tuple(str(Path(d).resolve()) for d in args.tasks_dir),
                pass_env=tuple(args.pass_env),
                confine=args.confine,
            )
            print(
                f"experiment {name}: {len(config.agents)} agent(s) x {len(config.tasks)} "
                f"task(s) x {config.repeat} repeat(s)",
                file=sys.stderr,
            )
        record, results, complete = sweep(
            name,
            config,
            Path(data_dir),
            parallel=args.parallel,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except KeyboardInterrupt:
        return 130
    except (SweepError, StoreError, TaskError) as exc:
        print(f"evopolicy-mcp agent sweep: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {
                    "experiment": record.name,
                    "complete": complete,
                    "runs": record.runs(),
                    "ran": [{"run_id": r.run_id, **r.outcome} for r in results],
                },
                indent=2,
            )
        )
    else:
        done = "complete" if complete else "not complete (some cells could not run)"
        print(f"experiment {record.name}: {done}; {len(record.runs())} run(s)")
        print(f"  leaderboard: evopolicy-mcp leaderboard --experiment {record.name}")
    return 0 if complete else 1


def cmd_agent(args: argparse.Namespace) -> int:
    if args.agent_command == "sweep":
        return cmd_sweep(args)
    if args.agent_command == "check":
        from evopolicy_mcp.agents.check import check_agent

        report = check_agent(
            PROVIDERS[args.agent], tasks_dirs=tuple(args.tasks_dir), confine=args.confine
        )
        if args.json:
            print(json.dumps({**report.__dict__, "ok": report.ok}, indent=2))
        else:
            where = report.executable or "not installed"
            print(f"{report.agent}: {where}" + (f" ({report.version})" if report.version else ""))
            print(f"  server: {report.server}" + (f" via {report.how}" if report.how else ""))
            if report.detail:
                print(f"  {report.detail}")
            if report.warning:
                print(f"  warning: {report.warning}")
            print(f"  confinement: {confinement_line(report.confinement)}")
            for name, detail in report.confinement.get("layers", {}).items():
                print(f"{'ok':>7}  {name:<11} {detail}")
            for name, detail in report.confinement.get("missing", {}).items():
                print(f"{'MISSING':>7}  {name:<11} {detail}")
        return 0 if report.ok else 1
    opts = AgentOptions(
        agent=args.agent,
        task=args.task,
        data_dir=args.data_dir or default_data_dir(),
        tasks_dirs=tuple(args.tasks_dir),
        workspace=args.workspace,
        run=args.run,
        model=args.model,
        effort=args.effort,
        timeout=args.timeout,
        grace=args.grace,
        seed=args.seed,
        isolation=args.isolation,
        pass_env=tuple(args.pass_env),
        workers=args.workers,
        executor=args.executor,
        ray_address=args.ray_address,
        trace_all=args.trace_all,
        trace_steps=args.trace_steps,
        finish=args.finish,
        storage_mb=args.storage_mb,
        confine=args.confine,
    )
    try:
        outcome = run_agent(opts)
    except AgentError as exc:
        print(f"evopolicy-mcp agent run: {exc}", file=sys.stderr)
        return 2
    except (StoreError, OSError) as exc:  # the records cannot be read or written
        print(f"evopolicy-mcp agent run: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(outcome.as_dict(), indent=2))
    else:
        _print_outcome(outcome)
    if outcome.reason == "interrupted":
        return 130
    return 0 if outcome.reason == "finalized" and outcome.run_state == "finalized" else 1
