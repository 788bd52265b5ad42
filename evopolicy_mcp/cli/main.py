"""The ``evopolicy-mcp`` command: operator and developer entry points.

Each subcommand translates arguments and prints; the rules live below. Bad
input exits non-zero with a one-line reason on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evopolicy_mcp.cli.options import WORKERS_HELP, add_run_arguments, positive_int

__all__ = ["main"]


class UsageError(Exception):
    """Bad input from the command line: printed as one line, exit code 2."""


def _tasks(args: argparse.Namespace) -> dict[str, Any]:
    from evopolicy_mcp.tasks.model import load_tasks

    return load_tasks(args.tasks_dir or ())


def cmd_tasks(args: argparse.Namespace) -> int:
    from evopolicy_mcp.tasks.model import load_catalog, unavailable

    catalog = load_catalog(args.tasks_dir or ())
    tasks = list(catalog.tasks.values())
    if args.family is not None:
        tasks = [t for t in tasks if t.family == args.family]
        if not tasks:
            known = ", ".join(sorted({t.family for t in catalog.tasks.values()}))
            raise UsageError(f"no tasks in family {args.family[:60]!r}; families: {known}")
    if args.json:
        rows = [
            {
                "id": t.id,
                "family": t.family,
                "title": t.title,
                "summary": t.summary,
                "adapter": t.adapter,
                "extra": t.extra,
                "available": unavailable(t) is None,
                "budget": t.budget.model_dump(),
            }
            for t in tasks
        ]
        print(json.dumps(rows, indent=2))
        return 0
    groups: dict[str, list[Any]] = {}
    for t in tasks:
        groups.setdefault(t.family, []).append(t)
    width = max((len(t.id) for t in tasks), default=4)
    missing_extras: set[str] = set()
    for family, members in sorted(groups.items()):
        info = catalog.family_of(members[0])
        extras = sorted({t.extra for t in members if t.extra})
        absent = sorted({t.extra for t in members if t.extra and unavailable(t)})
        missing_extras.update(absent)
        needs = f"  [extra: {', '.join(extras)}" + (" - NOT INSTALLED]" if absent else "]")
        title = f"  {info.title}" if info.title != family else ""
        print(
            f"{family} ({len(members)} task{'s' if len(members) != 1 else ''}){title}"
            + (needs if extras else "")
        )
        for t in members:
            mark = "  (not installed)" if t.extra in absent else ""
            print(f"  {t.id:<{width}}  {t.budget.episodes:>6} episodes  {t.summary}{mark}")
    print(f"{len(tasks)} tasks in {len(groups)} families")
    if missing_extras:
        listed = ",".join(sorted(missing_extras))
        print(f'not installed: [{listed}]; add them with pip install "evopolicy-mcp[{listed}]"')
    return 0


def _parse_episodes(text: str | None, default: int) -> list[int]:
    if text is None:
        return list(range(default))
    try:
        count = int(text)
    except ValueError:
        raise UsageError(f"--episodes wants a number of episodes, got {text!r}") from None
    if count < 1:
        raise UsageError("--episodes must be at least 1")
    return list(range(count))


PROGRESS_FROM = 50  # episodes: an evaluate run this long reports progress on stderr
PROGRESS_SECONDS = 5.0


class _Progress:
    """Lines on stderr as episodes finish: every tenth of the run, or every few seconds."""

    def __init__(self, total: int) -> None:
        import threading
        import time

        self.total, self.done, self.shown = total, 0, 0
        self._clock = time.monotonic
        self._started = self._last = self._clock()
        self._lock = threading.Lock()

    def __call__(self, _summary: object) -> None:
        with self._lock:
            self.done += 1
            now = self._clock()
            step = self.done - self.shown >= max(1, self.total // 10)
            if self.done == self.total or step or now - self._last >= PROGRESS_SECONDS:
                self.shown, self._last = self.done, now
                print(
                    f"evaluate: {self.done}/{self.total} episodes ({now - self._started:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )


def cmd_evaluate(args: argparse.Namespace) -> int:
    from evopolicy_mcp.evaluation import seeds
    from evopolicy_mcp.evaluation.episodes import evaluate, jobs_for
    from evopolicy_mcp.evaluation.executors import make_executor
    from evopolicy_mcp.evaluation.snapshot import capture
    from evopolicy_mcp.kernel.sandbox import Isolation
    from evopolicy_mcp.runner.template import Runner
    from evopolicy_mcp.tasks.model import task_dirs, unknown_task

    tasks = _tasks(args)
    if args.task not in tasks:
        raise UsageError(
            unknown_task(args.task, tasks) + "; run `evopolicy-mcp tasks` to list them"
        )
    task = tasks[args.task]
    source = Path(args.policy_dir) if args.policy_dir else task.baseline_dir
    if not source.is_dir():
        raise UsageError(f"{source} is not a directory; give a program directory with policy.py")
    if not (source / "policy.py").is_file():
        raise UsageError(
            f"{source} has no policy.py; a program is a directory with policy.py at its top"
        )
    default_count = {
        "train": 10,
        "validation": task.validation.episodes,
        "test": task.assessment.episodes,
    }
    indices = _parse_episodes(args.episodes, default_count[args.split])
    isolation = Isolation(
        strict=args.isolation == "strict",
        hidden=tuple(map(str, task_dirs(args.tasks_dir or (), builtin=False))),
        # Hidden splits run from a private copy of the runtime, as the host judges them.
        private_runtime=args.split != "train",
    )
    runner = Runner(isolation=isolation)
    try:
        executor = make_executor(
            args.executor, workers=args.workers, runner=runner, ray_address=args.ray_address
        )
        try:
            with tempfile.TemporaryDirectory(prefix="evopolicy-eval-") as store:
                program = capture(source, Path(store))
                jobs = jobs_for(task, args.split, indices, seeds.secret_from_seed(args.seed))
                feedback = evaluate(
                    program,
                    task,
                    jobs,
                    executor=executor,
                    traces=args.json,
                    on_episode=_Progress(len(jobs)) if len(jobs) >= PROGRESS_FROM else None,
                )
        finally:
            executor.close()
    finally:
        runner.close()
    # Every episode a policy failure: the program does not run, whatever the score says.
    status = 1 if feedback.policy_failures == len(feedback.episodes) else 0
    if args.json:
        from evopolicy_mcp.host.feedback_pages import evaluation_view
        from evopolicy_mcp.host.pages import compact

        print(json.dumps(compact(evaluation_view(task, args.split, feedback)), indent=2))
        return status
    print(f"{task.id}: {feedback.summary_line()}  [{feedback.seconds:.2f} s]")
    for e in feedback.episodes:
        extra = f"  {e.failure.value}: {e.message}" if e.failure else ""
        print(
            f"  episode {e.index:>4}  {e.status:<6}  return {e.episode_return:>10.4g}  steps {e.steps:>6}{extra}"
        )
        if e.traceback:
            print("    " + e.traceback.replace("\n", "\n    "))
    for name, value in feedback.metrics.items():
        print(f"  {name}: {value:.4g}")
    if status:
        print(f"evaluate: every episode ended in a policy failure ({len(feedback.episodes)})",
              file=sys.stderr)  # fmt: skip
    return status


def cmd_doctor(args: argparse.Namespace) -> int:
    from evopolicy_mcp.agents import confine
    from evopolicy_mcp.evaluation.executor import ThreadExecutor
    from evopolicy_mcp.kernel import mailbox
    from evopolicy_mcp.kernel.sandbox import Isolation, probe

    found = probe()
    print("policy processes (`--isolation strict` refuses without every layer):")
    print(found.text())
    pool = ThreadExecutor()
    place = pool.placement(0)
    if place.spin:
        how = (
            "the host on one CPU, policy processes on the others, both spinning "
            + ("(taking turns where they share a CPU) " if place.shared else "")
            + (
                "through a shared-memory mailbox"
                if mailbox.supported()
                else "on their pipes (the mailbox is x86-64 only)"
            )
        )
    else:
        how = "the host and policy processes share a CPU and sleep between hand-overs"
    cpus = len(pool.cpus)
    print(
        f"   info  hand-over   {cpus} CPU{'s' if cpus != 1 else ''}, {pool.workers} episode"
        f"{'s' if pool.workers != 1 else ''} at once by default: {how}"
    )
    print("agent CLIs under `agent run` (`--confine strict` refuses without every layer):")
    print(confine.probe_text())
    missing = found.missing(Isolation())
    agent_missing = [layer for layer in confine.probe().values() if not layer.available]
    if missing:
        print(
            f"{len(missing)} layer(s) missing: `--isolation strict` would refuse to run policies."
        )
    if agent_missing:
        print(
            f"{len(agent_missing)} agent sandbox layer(s) missing: `agent run --confine strict` "
            "would refuse to start an agent."
        )
    if missing or agent_missing:
        return 1
    print("every isolation layer is available.")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.sizes:
        from evopolicy_mcp.cli.bench_sizes import print_sizes, run_sizes

        rows = run_sizes()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print_sizes(rows)
        return 0
    show: Callable[[Any], None]
    if args.private_runtime:
        from evopolicy_mcp.cli.bench_private import print_private_bench, run_private_bench

        figures = run_private_bench(args.episodes or 64, args.rounds or 5)
        show = print_private_bench
    elif args.agent_sandbox:
        from evopolicy_mcp.cli.bench_agent import print_agent_bench, run_agent_bench

        figures = run_agent_bench()
        show = print_agent_bench
    elif args.executor is not None:
        from evopolicy_mcp.cli.bench_executors import print_executor_bench, run_executor_bench

        kinds = args.executor.split(",")
        unknown = [k for k in kinds if k not in ("thread", "process", "ray")]
        if unknown:
            raise UsageError(f"--executor: unknown {unknown[0]!r}; use thread, process, ray")
        figures = run_executor_bench(
            args.task or "cartpole",
            kinds,
            episodes=args.episodes or 24,
            rounds=args.rounds or 3,
            workers=args.workers,
            ray_address=args.ray_address,
            policy=args.policy,
            parameters=args.param or [],
            tasks_dirs=args.tasks_dir or [],
        )
        show = print_executor_bench
    elif args.task is not None:
        from evopolicy_mcp.cli.bench_task import print_task_bench, run_task_bench

        figures = run_task_bench(args.task, args.episodes or 20, args.workers)
        show = print_task_bench
    elif args.mcp:
        from evopolicy_mcp.cli.bench_mcp import print_mcp_bench, run_mcp_bench

        figures = run_mcp_bench()
        show = print_mcp_bench
    else:
        from evopolicy_mcp.cli.bench import print_bench, run_bench

        figures = run_bench(args.episodes or 100, args.workers, args.rounds or 5)
        show = print_bench
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        show(figures)
    return 0


def cmd_check_adapter(args: argparse.Namespace) -> int:
    from evopolicy_mcp.adapters.conformance import check_adapter

    try:
        parameters = json.loads(args.parameters) if args.parameters else None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--parameters is not JSON: {exc}") from None
    checks = check_adapter(args.name, parameters)
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        print(f"{mark} {check.name}: {check.detail}")
    failed = [c for c in checks if not c.ok]
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def _lazy(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(module), function)(args) or 0)

    return run


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    from importlib.metadata import version

    parser = argparse.ArgumentParser(
        prog="evopolicy-mcp",
        description="Evolve executable policies through MCP, scored on hidden episodes.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version('evopolicy-mcp')}"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, handler: Callable[[argparse.Namespace], int], help_: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(handler=handler)
        return p

    def tasks_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--tasks-dir",
            action="append",
            metavar="DIR",
            help="extra directory of task files (repeatable; also EVOPOLICY_TASKS)",
        )

    p = add("tasks", cmd_tasks, "list the tasks, grouped by family")
    tasks_dir(p)
    p.add_argument("--family", metavar="F", help="only the tasks of family F")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = add("evaluate", cmd_evaluate, "evaluate a program on a task's episodes")
    p.epilog = (
        "Exit status: 0 when at least one episode ran to its end, 1 when every episode "
        "ended in a policy failure, 2 on bad input. Runs of 50 episodes or more report "
        "progress on stderr."
    )
    p.add_argument("policy_dir", nargs="?", help="program directory (default: the task's baseline)")
    p.add_argument("--task", required=True, help="task id (see `evopolicy-mcp tasks`)")
    p.add_argument("--split", choices=["train", "validation", "test"], default="train")
    p.add_argument(
        "--episodes", help="number of episodes (default: 10 for train, the task's size otherwise)"
    )
    p.add_argument("--seed", type=int, default=0, help="public seed the episode seeds derive from")
    add_run_arguments(p, "run")
    p.add_argument("--json", action="store_true", help="print the feedback as one JSON document")
    tasks_dir(p)

    add(
        "doctor",
        cmd_doctor,
        "show which sandbox layers policy processes and agent CLIs get on this machine",
    )

    p = add("check-adapter", cmd_check_adapter, "run the adapter conformance checks")
    p.add_argument("name", help="adapter name (entry point in group evopolicy_mcp.environments)")
    p.add_argument(
        "--parameters", help="adapter parameters as JSON (default: the adapter's example)"
    )

    p = add(
        "bench",
        cmd_bench,
        "measure harness speed against raw Gymnasium (or any task's environment, --task)",
    )
    p.add_argument(
        "--episodes",
        type=positive_int,
        default=None,
        help="default 100 (20 with --task, 24 per executor with --executor)",
    )
    p.add_argument(
        "--task",
        metavar="ID",
        help="measure this task's environment with its baseline instead (raw against the "
        "harness; with --executor: the executors on its episodes)",
    )
    p.add_argument("--workers", type=positive_int, default=None, help=WORKERS_HELP)
    p.add_argument(
        "--rounds",
        type=positive_int,
        default=None,
        help="split the episodes into this many rounds of every measurement (medians; "
        "default 5, 3 with --task)",
    )
    p.add_argument("--mcp", action="store_true", help="measure the MCP layer over stdio instead")
    p.add_argument(
        "--sizes",
        action="store_true",
        help="print how many characters each MCP result gives the agent instead",
    )
    p.add_argument(
        "--executor",
        help="compare executors on --task's episodes (default task: cartpole), comma-separated: "
        "thread,process,ray",
    )
    p.add_argument("--ray-address", metavar="ADDR", help="with --executor ray: the cluster to join")
    p.add_argument("--policy", metavar="DIR", help="with --task: the program to run")
    p.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="with --task: a task parameter (JSON value), e.g. length=1000 (repeatable)",
    )
    tasks_dir(p)
    p.add_argument(
        "--agent-sandbox",
        action="store_true",
        help="measure what confining an agent CLI costs at its start instead",
    )
    p.add_argument(
        "--private-runtime",
        action="store_true",
        help="measure what running hidden splits from a private copy of the runtime costs "
        "instead (--episodes: a validation's worth, default 64)",
    )
    p.add_argument("--json", action="store_true")

    _add_host_commands(add, tasks_dir, command)
    return parser


def _add_host_commands(
    add: Any, tasks_dir: Callable[[argparse.ArgumentParser], None], command: str | None
) -> None:
    """Subcommands backed by the host and the MCP server. Their argument definitions live
    beside them in modules that import the MCP SDK (most of a second), so those are
    imported only when that subcommand is the one being run."""
    for name, module, function, adder, help_ in (
        (
            "serve",
            "cli.serve",
            "cmd_serve",
            "add_serve_arguments",
            "run the MCP server (stdio by default)",
        ),
        (
            "connect",
            "cli.connect",
            "cmd_connect",
            "add_connect_arguments",
            "a stdio MCP server forwarding to a running one (token: $EVOPOLICY_TOKEN)",
        ),
        (
            "demo",
            "cli.demo",
            "cmd_demo",
            "add_demo_arguments",
            "play a full scripted run on cartpole over MCP",
        ),
        (
            "judge",
            "cli.judge",
            "cmd_judge",
            "add_judge_arguments",
            "finish the judging of a finalized run (validation, selection, assessment)",
        ),
        (
            "agent-config",
            "agents.config",
            "cmd_agent_config",
            "add_agent_config_arguments",
            "print an agent CLI's MCP config with this machine's paths",
        ),
        (
            "agent",
            "cli.agent",
            "cmd_agent",
            "add_agent_arguments",
            "run an agent CLI (Claude Code, Codex, Kimi Code, Qoder) headless on a task",
        ),
    ):
        p = add(name, _lazy(f"evopolicy_mcp.{module}", function), help_)
        if command == name:
            import importlib

            getattr(importlib.import_module(f"evopolicy_mcp.{module}"), adder)(p)
    data_help = "data directory (default: EVOPOLICY_DATA_DIR or a per-user dir)"
    p = add(
        "runs",
        _lazy("evopolicy_mcp.cli.operator", "cmd_runs"),
        "table of runs in the data directory",
    )
    p.add_argument("--data-dir", help=data_help)
    p.add_argument("--json", action="store_true")
    p = add(
        "report",
        _lazy("evopolicy_mcp.cli.results", "cmd_report"),
        "everything the host knows about a run",
    )
    p.add_argument("run_id")
    p.add_argument("--data-dir", help=data_help)
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true")
    form.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML page: learning curve, program diffs, failures, "
        "feedback, replays (needs the [results] extra)",
    )
    p.add_argument(
        "--embed-mb",
        type=float,
        default=20.0,
        help="most MiB of replays embedded in the HTML page (default 20)",
    )
    from evopolicy_mcp.cli import results

    p = add(
        "leaderboard",
        _lazy("evopolicy_mcp.cli.results", "cmd_leaderboard"),
        "runs by task and agent: assessment means with 95%% intervals, gaps, cost",
    )
    results.add_leaderboard_arguments(p)
    p = add(
        "export",
        _lazy("evopolicy_mcp.cli.results", "cmd_export"),
        "write runs as a rollout dataset (JSON lines or Parquet), schema in docs/results.md",
    )
    results.add_export_arguments(p)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    args, extra = parser.parse_known_args(argv)
    if extra and command == "export" and not any(e.startswith("-") for e in extra):
        args.items += extra  # `export RUN --format parquet OUT`: OUT after an option
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)[:200]}")
    from evopolicy_mcp.adapters.protocol import AdapterError
    from evopolicy_mcp.evaluation.episodes import EvaluationAborted
    from evopolicy_mcp.evaluation.snapshot import ProgramError
    from evopolicy_mcp.tasks.model import TaskError

    try:
        return int(args.handler(args))
    except (UsageError, TaskError, ProgramError, AdapterError, EvaluationAborted) as exc:
        print(f"evopolicy-mcp {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
