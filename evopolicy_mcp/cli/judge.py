"""``evopolicy-mcp judge RUN``: finish a finalized run's judging, and the detached
process that ``serve`` hands each finalized run to.

A server judges nothing itself: when an agent finalizes, the server starts
``evopolicy-mcp judge RUN`` in a session of its own (so the MCP client's kill of
the server's process group does not reach it) and answers at once. That
process claims the run, waits for the run's pending training submissions,
validates, selects and assesses, and exits. A client that disconnects right
after the acknowledgement changes nothing. If the judging process dies, the
next ``serve`` on the data directory, or ``evopolicy-mcp judge RUN`` by hand,
starts it again where it stopped (results are committed one by one; judging
charges nothing).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from evopolicy_mcp.cli.options import add_run_arguments, run_options
from evopolicy_mcp.host.authority import Host, HostError
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.store.database import Store, StoreError, default_data_dir

__all__ = ["add_judge_arguments", "cmd_judge", "detached_judge"]

LOG_NAME = "judge.log"  # in the run's record directory


def add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="a run id from `evopolicy-mcp runs`")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="records directory (default: $EVOPOLICY_DATA_DIR or ~/.local/share/evopolicy-mcp)",
    )
    parser.add_argument(
        "--tasks-dir",
        type=Path,
        action="append",
        default=[],
        help="extra directory of task files (repeatable; kept out of policies' reach)",
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=math.inf,
        help="seconds to wait for the end (default: no limit)",
    )


def judge_argv(
    run_id: str, data_dir: Path, tasks_dirs: Sequence[Path], options: argparse.Namespace
) -> list[str]:
    argv = [sys.executable, "-m", "evopolicy_mcp", "judge", run_id, "--data-dir", str(data_dir)]
    for d in tasks_dirs:
        argv += ["--tasks-dir", str(Path(d).expanduser().resolve())]
    return argv + run_options(options)


def detached_judge(
    data_dir: Path, tasks_dirs: Sequence[Path], options: argparse.Namespace
) -> Callable[[str], None]:
    """A host's ``hand_off``: start ``evopolicy-mcp judge RUN`` in a new session, its
    output appended to ``runs/RUN/judge.log``. It runs episodes as ``options`` say
    (the serving command's ``--executor``, ``--workers``, ``--isolation``)."""

    def hand_off(run_id: str) -> None:
        log_dir = data_dir / "runs" / run_id
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / LOG_NAME, "ab") as log:
            subprocess.Popen(
                judge_argv(run_id, data_dir, tasks_dirs, options),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd="/",
                start_new_session=True,
                close_fds=True,
            )

    return hand_off


def cmd_judge(args: argparse.Namespace) -> int:
    data_dir = (args.data_dir or default_data_dir()).expanduser().resolve()
    try:
        Store(data_dir, create=False).close()
    except StoreError as exc:
        print(f"evopolicy-mcp judge: {exc}; pass --data-dir", file=sys.stderr)
        return 1
    with Host(
        data_dir,
        tasks_dirs=tuple(args.tasks_dir),
        workers=args.workers,
        executor=args.executor,
        ray_address=args.ray_address,
        isolation=Isolation(strict=args.isolation == "strict"),
        resume=False,
    ) as host:
        run = host.store.get_run(args.run_id)
        if run is None:
            print(
                f"evopolicy-mcp judge: no run {args.run_id!r}; `evopolicy-mcp runs` lists them",
                file=sys.stderr,
            )
            return 1
        if run.state == "open":
            print(
                f"evopolicy-mcp judge: run {run.id} is open: nothing to judge until its agent "
                "finalizes it",
                file=sys.stderr,
            )
            return 1
        try:
            status = host.finish(run.id, args.timeout)
        except HostError as exc:
            print(f"evopolicy-mcp judge: {exc.message}", file=sys.stderr)
            return 1
        report = host.report(run.id)
    if status.state != "finalized":
        print(f"run {run.id}: still {status.state} after {args.timeout:g} s", file=sys.stderr)
        return 1
    assessed = report.assessment.score if report.assessment is not None else None
    print(f"run {run.id}: finalized; selected {report.selected}, assessment score {assessed}")
    return 0
