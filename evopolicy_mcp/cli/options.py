"""Command-line options shared by the operator commands and ``serve``."""

from __future__ import annotations

import argparse

__all__ = [
    "WORKERS_HELP",
    "add_run_arguments",
    "run_rule_arguments",
    "positive_int",
    "run_options",
]

WORKERS_HELP = (
    "thread executor: episodes at once (default: one per CPU but the first, at least two "
    "with two CPUs); process: worker processes (default: one per CPU); ray: actors "
    "(default: one per CPU of the cluster)"
)


def add_run_arguments(parser: argparse.ArgumentParser, what: str = "run policies") -> None:
    """``--executor``, ``--ray-address``, ``--workers`` and ``--isolation``: where and how
    a command runs episodes and their policy processes."""
    parser.add_argument(
        "--executor",
        choices=("thread", "process", "ray"),
        default="thread",
        help="where episodes run: one host thread per evaluation (thread, the default), "
        "worker processes on every CPU (process), or a Ray cluster (ray, needs the [ray] "
        "extra); see docs/scaling.md",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="with --executor ray: the cluster to join (host:port of `ray start --head`); "
        "default: a local cluster on 127.0.0.1",
    )
    parser.add_argument("--workers", type=positive_int, default=None, help=WORKERS_HELP)
    parser.add_argument(
        "--isolation",
        choices=("default", "strict"),
        default="default",
        help=f"strict: refuse to {what} if any sandbox layer is missing (see `doctor`)",
    )


def run_rule_arguments(parser: argparse.ArgumentParser) -> None:
    """``--finish`` and ``--storage-mb``: rules of the runs a command creates, over their
    tasks'."""
    parser.add_argument(
        "--finish",
        choices=("early", "exhaust"),
        default=None,
        help="early: the budget is a maximum, an agent may finalize whenever; exhaust: "
        "finalize is refused while episodes remain (agents compared at equal spend). "
        "Default: the task's rule (early unless its file says otherwise)",
    )
    parser.add_argument(
        "--storage-mb",
        type=positive_float,
        default=None,
        metavar="MIB",
        help="most MiB of step traces and episode files each run keeps; past it the oldest "
        "submissions' are evicted, never the newest's (default: the task's, 256)",
    )


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a number above 0")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def run_options(args: argparse.Namespace) -> list[str]:
    """The :func:`add_run_arguments` options of ``args``, as arguments of another command."""
    argv = []
    if args.executor != "thread":
        argv += ["--executor", args.executor]
    if args.ray_address:
        argv += ["--ray-address", args.ray_address]
    if args.workers is not None:
        argv += ["--workers", str(args.workers)]
    if args.isolation != "default":
        argv += ["--isolation", args.isolation]
    return argv
