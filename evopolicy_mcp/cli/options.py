"""Command-line options shared by the operator commands and ``serve``."""

from __future__ import annotations

import argparse

__all__ = ["WORKERS_HELP", "add_run_arguments", "positive_int"]

WORKERS_HELP = (
    "episodes at once (default: one per CPU but the first, at least two with two CPUs; "
    "the host steps them all on the first CPU, their policy processes run on the others)"
)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_run_arguments(parser: argparse.ArgumentParser, what: str = "run policies") -> None:
    """``--workers`` and ``--isolation``: how a command runs policy processes."""
    parser.add_argument("--workers", type=positive_int, default=None, help=WORKERS_HELP)
    parser.add_argument(
        "--isolation",
        choices=("default", "strict"),
        default="default",
        help=f"strict: refuse to {what} if any sandbox layer is missing (see `doctor`)",
    )
