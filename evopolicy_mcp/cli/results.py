"""``evopolicy-mcp leaderboard``, ``export`` and ``report RUN --html FILE``.

They read the records (and exported bundles) for the operator; nothing is
resumed or evaluated. Each ``cmd_*`` takes parsed arguments and returns an
exit code; bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from evopolicy_mcp.cli.operator import cmd_report as cmd_text_report
from evopolicy_mcp.cli.operator import text_table
from evopolicy_mcp.results.extras import MissingExtra
from evopolicy_mcp.results.leaderboard import Leaderboard, build_leaderboard
from evopolicy_mcp.results.summary import RunSummary, summarize_all
from evopolicy_mcp.store.database import Store, StoreError, default_data_dir
from evopolicy_mcp.store.experiments import read_experiment

__all__ = [
    "add_export_arguments",
    "add_leaderboard_arguments",
    "cmd_export",
    "cmd_leaderboard",
    "cmd_report",
    "cmd_report_html",
    "format_leaderboard",
]

DATA_HELP = "data directory (default: EVOPOLICY_DATA_DIR or a per-user dir)"


def add_leaderboard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help=DATA_HELP)
    p.add_argument(
        "--bundle",
        action="append",
        default=[],
        metavar="DIR",
        help="an exported bundle (from `export`, on any machine) to include; repeatable. "
        "With bundles, the data directory is read only when --data-dir is given",
    )
    p.add_argument("--experiment", help="only the runs of this experiment (`agent sweep`)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--task", help="only this task")
    which.add_argument("--family", help="only this family")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("--html", metavar="FILE", help="write a self-contained HTML page")


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "items", nargs="+", metavar="RUN... OUT", help="runs to export, then a new directory"
    )
    p.add_argument("--experiment", help="export the runs of this experiment")
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("--data-dir", help=DATA_HELP)


def _store(args: argparse.Namespace) -> Store:
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    try:
        return Store(data_dir, create=False)
    except StoreError as exc:
        raise StoreError(f"{exc}; pass --data-dir") from None


def _experiment_runs(store: Store, name: str) -> list[str]:
    record = read_experiment(store.data_dir, name)
    if record is None:
        raise StoreError(f"no experiment {name[:40]!r} in {store.data_dir}")
    return record.runs()


def _summaries(args: argparse.Namespace) -> list[RunSummary]:
    from evopolicy_mcp.results.export import read_bundle_runs

    found: list[RunSummary] = []
    if args.data_dir or not args.bundle:
        store = _store(args)
        try:
            ids = _experiment_runs(store, args.experiment) if args.experiment else None
            found += summarize_all(store, ids, experiment=args.experiment)
        finally:
            store.close()
    for bundle in args.bundle:
        runs = read_bundle_runs(Path(bundle))
        if args.experiment:
            runs = [r for r in runs if r.experiment == args.experiment]
        found += runs
    return found


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.4g}, {high:.4g}]"


def format_leaderboard(board: Leaderboard) -> str:
    if not board.tasks:
        return "no runs"
    rows = []
    for r in board.tasks:
        tokens = (
            "-"
            if r.input_tokens_mean is None
            else f"{r.input_tokens_mean:.0f}/{r.output_tokens_mean or 0:.0f}"
        )
        rows.append(
            [
                r.task_id,
                r.agent,
                "yes" if r.confined else "NO",
                f"{r.complete}/{r.runs}",
                str(r.failed + r.interrupted + r.open),
                _num(r.assessment_mean),
                _interval(r.assessment_low, r.assessment_high),
                _num(r.public_mean),
                _num(r.validation_mean),
                _num(r.gap_public_assessment, 3),
                _num(r.normalised_mean, 3),
                f"{_num(r.episodes_used_mean, 3)}/{r.episodes_budget}",
                _num(r.wall_seconds_mean, 3),
                tokens,
                "-" if r.cost_usd_mean is None else f"${r.cost_usd_mean:.2f}",
            ]
        )
    header = ["task", "agent", "confined", "complete", "not", "assessment", "95% interval",
              "public", "validation", "pub-assess", "normalised", "episodes", "wall s",
              "tokens in/out", "cost"]  # fmt: skip
    lines = text_table(header, rows).splitlines()
    if board.families:
        lines += [""]
        fam = [
            [
                f.family,
                f.agent,
                "yes" if f.confined else "NO",
                str(f.tasks),
                str(f.normalised_tasks),
                _num(f.normalised_mean, 3),
            ]
            for f in board.families
        ]
        lines += text_table(
            ["family", "agent", "confined", "tasks", "with reference", "normalised mean"], fam
        ).splitlines()
    lines += [
        "",
        f"{board.runs} run(s). Means over complete runs; 'not' counts failed, interrupted "
        "and open runs (never averaged in). confined NO: unconfined, or not recorded.",
        "normalised = (assessment - task baseline) / (task reference - baseline); "
        "`evopolicy-mcp report RUN` shows a run.",
    ]
    return "\n".join(lines)


def cmd_leaderboard(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        board = build_leaderboard(_summaries(args), task=args.task, family=args.family)
        if args.html:
            from evopolicy_mcp.results.board_page import leaderboard_html

            Path(args.html).write_text(leaderboard_html(board))
            print(f"wrote {args.html}", file=out)
        elif args.json:
            print(board.model_dump_json(indent=2), file=out)
        else:
            print(format_leaderboard(board), file=out)
    except (StoreError, MissingExtra, OSError) as exc:
        print(f"evopolicy-mcp leaderboard: {exc}", file=err)
        return 2
    return 0


def cmd_export(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    from evopolicy_mcp.results.export import export_runs

    *run_ids, target = args.items
    if bool(run_ids) == bool(args.experiment):
        print("evopolicy-mcp export: give RUN ids or --experiment E, then OUT", file=err)
        return 2
    try:
        store = _store(args)
        try:
            ids = _experiment_runs(store, args.experiment) if args.experiment else run_ids
            manifest = export_runs(
                store, ids, Path(target), args.format, experiment=args.experiment
            )
        finally:
            store.close()
    except (StoreError, MissingExtra, OSError) as exc:
        print(f"evopolicy-mcp export: {exc}", file=err)
        return 2
    counts = ", ".join(f"{t['rows']} {name}" for name, t in manifest["tables"].items())
    print(f"wrote {target} ({manifest['schema']}/{manifest['version']}): {counts}", file=out)
    return 0


def cmd_report(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``report RUN``: the text or JSON report, or with ``--html FILE`` the page."""
    if getattr(args, "html", None):
        return cmd_report_html(args, out, err)
    return cmd_text_report(args, out, err)


def cmd_report_html(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    from evopolicy_mcp.results.run_page import run_html

    try:
        store = _store(args)
        try:
            page = run_html(store, args.run_id, embed_bytes=int(args.embed_mb * (1 << 20)))
        finally:
            store.close()
        if page is None:
            print(f"no run {args.run_id[:200]!r}; `evopolicy-mcp runs` lists the runs", file=err)
            return 1
        Path(args.html).write_text(page)
    except (StoreError, MissingExtra, OSError) as exc:
        print(f"evopolicy-mcp report: {exc}", file=err)
        return 2
    print(f"wrote {args.html} ({len(page) >> 10} KiB)", file=out)
    return 0
