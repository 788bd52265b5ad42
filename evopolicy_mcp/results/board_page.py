"""The leaderboard as a self-contained HTML page: a chart of means with intervals, the tables."""

from __future__ import annotations

from typing import Any

from evopolicy_mcp.results.charts import chart, esc, figure, page, table
from evopolicy_mcp.results.leaderboard import Leaderboard

__all__ = ["leaderboard_html"]


def _n(value: float | None, digits: int = 4) -> str:
    return esc(None if value is None else f"{value:.{digits}g}")


def _means_chart(board: Leaderboard) -> str:
    data: list[dict[str, Any]] = []
    for agent in dict.fromkeys((r.agent, r.confined) for r in board.tasks):
        rows = [r for r in board.tasks if (r.agent, r.confined) == agent and r.complete]
        if not rows:
            continue
        data.append(
            {
                "type": "bar",
                "name": agent[0] + ("" if agent[1] else " (not confined)"),
                "x": [r.task_id for r in rows],
                "y": [r.assessment_mean for r in rows],
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        None
                        if r.assessment_high is None
                        else r.assessment_high - (r.assessment_mean or 0)
                        for r in rows
                    ],  # fmt: skip
                    "arrayminus": [
                        None
                        if r.assessment_low is None
                        else (r.assessment_mean or 0) - r.assessment_low
                        for r in rows
                    ],  # fmt: skip
                },
                "text": [f"{r.complete} run(s)" for r in rows],
            }
        )
    layout = {
        "title": {"text": "Assessment score: mean and 95% interval over repeats"},
        "barmode": "group",
        "yaxis": {"title": {"text": "assessment score"}},
        "margin": {"t": 50, "r": 20},
        "legend": {"orientation": "h", "y": -0.2},
    }
    return chart("assessment-means", figure(data, layout))


def leaderboard_html(board: Leaderboard) -> str:
    rows = [
        [
            esc(r.task_id),
            esc(r.agent),
            '<span class="tag good">yes</span>'
            if r.confined
            else '<span class="tag warn">no</span>',
            f"{r.complete}/{r.runs}",
            esc(r.failed + r.interrupted + r.open),
            _n(r.assessment_mean),
            "-"
            if r.assessment_low is None
            else f"[{_n(r.assessment_low)}, {_n(r.assessment_high)}]",
            _n(r.public_mean),
            _n(r.validation_mean),
            _n(r.gap_public_assessment, 3),
            _n(r.normalised_mean, 3),
            f"{_n(r.episodes_used_mean, 3)}/{r.episodes_budget}",
            _n(r.wall_seconds_mean, 3),
            _n(r.input_tokens_mean, 3),
            _n(r.output_tokens_mean, 3),
            "-" if r.cost_usd_mean is None else f"${r.cost_usd_mean:.2f}",
        ]
        for r in board.tasks
    ]
    header = ["task", "agent", "confined", "complete", "not complete", "assessment",
              "95% interval", "public", "validation", "public - assessment", "normalised",
              "episodes", "wall s", "tokens in", "tokens out", "cost"]  # fmt: skip
    families = [
        [
            esc(f.family),
            esc(f.agent),
            "yes" if f.confined else "no",
            esc(f.tasks),
            esc(f.normalised_tasks),
            _n(f.normalised_mean, 3),
        ]
        for f in board.families
    ]
    body = "\n".join(
        [
            "<h1>Leaderboard</h1>",
            f'<p class="sub">{board.runs} run(s). {esc(board.note)}. Runs not confined '
            "(or not recorded as confined) never share a row with confined ones.</p>",
            _means_chart(board) if board.tasks else "<p>no runs</p>",
            "<h2>Tasks</h2>",
            table(header, rows, set(range(3, 16))),
            "<h2>Families (normalised)</h2>",
            table(
                ["family", "agent", "confined", "tasks", "with reference", "normalised mean"],
                families,
                {3, 4, 5},
            ),  # fmt: skip
        ]
    )
    return page("evopolicy-mcp leaderboard", body)
