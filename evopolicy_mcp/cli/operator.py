"""Operator commands over the records: ``evopolicy-mcp runs`` and ``report RUN_ID``.

They read the store directly (no host is started, nothing is resumed) and
print everything, hidden results included: they are for the operator, never
for an agent. Each ``cmd_*`` takes parsed arguments and returns an exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TextIO

from evopolicy_mcp.agents.confine import confinement_line
from evopolicy_mcp.host.reports import build_report, build_rows
from evopolicy_mcp.host.views import RunReport
from evopolicy_mcp.store.database import DB_NAME, Store, StoreError, default_data_dir

__all__ = [
    "add_data_dir_argument",
    "add_report_arguments",
    "add_runs_arguments",
    "cmd_report",
    "cmd_runs",
    "text_table",
]


def add_data_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="records directory (default: $EVOPOLICY_DATA_DIR or ~/.local/share/evopolicy-mcp)",
    )


def add_runs_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_dir_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="a run id from `evopolicy-mcp runs`")
    add_data_dir_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")


def _data_dir(args: argparse.Namespace) -> Path:
    given = Path(args.data_dir).expanduser() if getattr(args, "data_dir", None) else None
    return given or default_data_dir()


def _open(args: argparse.Namespace, err: TextIO) -> Store | None:
    try:
        return Store(_data_dir(args), create=False)
    except StoreError as exc:
        print(f"{exc}; start a run with `evopolicy-mcp serve` or pass --data-dir", file=err)
        return None


# How the agent was confined, in the runs table: a leaderboard leaves out "UNCONFINED".
AGENT_COLUMN = {"confined": "confined", "unconfined": "UNCONFINED", "unknown": "-"}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def cmd_runs(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr  # the streams of the moment, not of import
    data_dir = _data_dir(args)
    if not (data_dir / DB_NAME).exists():  # no records yet: an empty table, not a fault
        rows = []
    else:
        store = _open(args, err)
        if store is None:
            return 1
        try:
            rows = build_rows(store)
        finally:
            store.close()
    if getattr(args, "json", False):
        print(json.dumps([r.model_dump() for r in rows], indent=2), file=out)
        return 0
    if not rows:
        print(f"no runs in {data_dir}; `evopolicy-mcp serve` starts them", file=out)
        return 0
    header = ["run", "task", "state", "subs", "best public", "selected", "validation",
              "assessment", "agent", "stored", "created"]  # fmt: skip
    body = [
        [
            r.run_id,
            r.task_id,
            r.state,
            str(r.submissions),
            _num(r.best_public_score),
            r.selected or "-",
            _num(r.validation_score),
            _num(r.assessment_score),
            AGENT_COLUMN[r.confinement],
            _bytes(r.stored_bytes),
            _when(r.created),
        ]
        for r in rows
    ]
    print(text_table(header, body), file=out)
    return 0


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n:.1f} GiB"


def cmd_report(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = out or sys.stdout, err or sys.stderr  # the streams of the moment, not of import
    store = _open(args, err)
    if store is None:
        return 1
    try:
        report = build_report(store, args.run_id)
    finally:
        store.close()
    if report is None:
        print(f"no run {args.run_id!r}; `evopolicy-mcp runs` lists the runs", file=err)
        return 1
    if getattr(args, "json", False):
        print(report.model_dump_json(indent=2), file=out)
    else:
        print(format_report(report), file=out)
    return 0


def format_report(r: RunReport) -> str:
    b = r.budget
    lines = [
        f"run {r.run_id}: task {r.task_id} ({r.task_title}), {r.state}",
        f"created {_when(r.created)}; finalized {_when(r.finalized)}",
        f"budget: {r.episodes_used}/{b.episodes} episodes, {r.submissions_used}/{b.submissions} "
        f"submissions, <= {b.per_submission} per submission, pool {b.pool}"
        + (f", {b.wall_seconds:g} s wall time" if b.wall_seconds else "")
        + (", finish: exhaust (the whole budget is spent)" if b.finish == "exhaust" else ""),
        f"stored: {_bytes(r.stored_bytes)} (traces and episode files beyond "
        f"{r.reproducibility.get('storage_mb', '?')} MiB are evicted, oldest submissions first)",
        f"score: {r.direction}",
        "",
        "submissions:",
    ]
    rows = [
        [
            s.submission_id,
            s.selector,
            str(s.episodes),
            s.state,
            _num(s.score),
            "-" if s.policy_failures is None else str(s.policy_failures),
            s.program_digest[:12],
        ]
        for s in r.submissions
    ]
    if rows:
        header = ["id", "episodes", "n", "state", "score", "failures", "program"]
        lines += ["  " + line for line in text_table(header, rows).splitlines()]
    else:
        lines.append("  none")
    lines += ["", f"candidates: {', '.join(r.candidates) or '-'}"]
    for v in r.validation:
        lines.append(
            f"  validation {v.submission_id}: {_num(v.score)} over {v.episodes} episodes, "
            f"{v.policy_failures} policy failures"
        )
    lines.append(
        f"selected: {r.selected or '-'}"
        + (f" ({r.selection_reason})" if r.selection_reason else "")
    )
    if r.assessment is not None:
        a = r.assessment
        lines.append(
            f"assessment {a.submission_id}: {_num(a.score)} over {a.episodes} episodes, "
            f"{a.policy_failures} policy failures"
        )
    if r.gap is not None:
        g = r.gap
        lines.append(
            f"gap: public {_num(g.public)}, validation {_num(g.validation)}, assessment "
            f"{_num(g.assessment)} (public-validation {_num(g.public_minus_validation)}, "
            f"validation-assessment {_num(g.validation_minus_assessment)})"
        )
    if r.agent is not None:
        lines.append(f"agent: {r.agent['agent']}, {confinement_line(r.agent['confinement'])}")
    if r.error:
        lines.append(f"last finalize error: {r.error}")
    repro = r.reproducibility
    lines += ["", "reproducibility:"]
    for key in ("task_digest", "task_file", "adapter", "python", "platform", "seed", "secret",
                "seed_derivation_version"):  # fmt: skip
        lines.append(f"  {key}: {repro.get(key)}")
    lines.append(f"  adapter_package: {repro.get('adapter_package')}")
    lines.append(f"  packages: {repro.get('packages')}")
    lines.append(f"  splits: {repro.get('splits')}")
    for e in r.events:  # written by `agent run`
        if e.kind == "agent_ended":
            d = e.detail
            lines.append(
                f"agent: {d.get('agent')} {d.get('reason')} after {d.get('seconds', 0):.1f} s, "
                f"exit code {d.get('exit_code')}; its output is in runs/{r.run_id}/agent/"
            )
        elif e.kind == "fallback_candidates":
            lines.append(f"  the agent did not finalize: candidates {e.detail.get('candidates')}")
    lines.append(f"events: {len(r.events)} (see --json)")
    return "\n".join(lines)
