"""Command-line options shared by the operator commands and ``serve``."""

from __future__ import annotations

import argparse

__all__ = ["WORKERS_HELP", "positive_int"]

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
