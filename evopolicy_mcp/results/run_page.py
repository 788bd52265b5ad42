"""One run as a self-contained HTML page: how the agent spent its budget, and what came out.

Sections: the outcome (public, validation and assessment scores of the
selected program; hidden results are marked as the operator's), the learning
curve (public score of each submission against episodes spent, best so far,
validation of the candidates and assessment of the selected program), failure
codes over the submissions, and each submission with its program's diff
against the previous submission, the feedback the agent saw, and the replays
of its traced episodes (embedded up to a byte budget, the selected and
candidate submissions first).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from evopolicy_mcp.results.charts import chart, esc, figure, page, table
from evopolicy_mcp.results.programs import program_diff, program_files
from evopolicy_mcp.results.seen import feedback_document, read_feedback, redactor
from evopolicy_mcp.results.summary import RunSummary, agent_label, summarize
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.records import SubmissionRecord

__all__ = ["run_html"]

EPISODE_ROWS = 60  # episode summaries shown per submission (the rest are counted)
TRACEBACKS = 3  # distinct failure tracebacks shown per submission
COLOURS = ["#2f6fde", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#868e96", "#f59f00"]


def _n(value: float | None) -> str:
    return esc(None if value is None else f"{value:.4g}")


def _diff_html(diff: str) -> str:
    if not diff:
        return "<p>same program as the previous submission</p>"
    out = []
    for line in diff.splitlines():
        cls = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else "hunk"
            if line.startswith("@@")
            else ""
        )
        out.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    return "<pre>" + "\n".join(out) + "</pre>"


def _spent(subs: list[SubmissionRecord]) -> dict[str, int]:
    total, at = 0, {}
    for s in subs:
        if s.state != "refunded":
            total += s.charged
        at[s.id] = total
    return at


def _curve(summary: RunSummary, subs: list[SubmissionRecord], hidden: dict[str, Any]) -> str:
    at = _spent(subs)
    done = [s for s in subs if s.state == "complete" and s.score is not None]
    better = max if summary.direction == "maximize" else min
    best: list[float] = []
    for s in done:
        assert s.score is not None
        best.append(s.score if not best else better(best[-1], s.score))
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "public score",
            "x": [at[s.id] for s in done],
            "y": [s.score for s in done],
            "text": [f"{s.id} ({s.selector}), {s.policy_failures or 0} failures" for s in done],
            "marker": {"size": 9, "color": COLOURS[0]},
            "legendrank": 1,
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "best so far",
            "x": [at[s.id] for s in done],
            "y": best,
            "line": {"shape": "hv", "color": COLOURS[0], "dash": "dot"},
            "legendrank": 2,
        },
    ]
    validation = hidden["validation"]
    if validation:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "validation of candidates (hidden)",
                "x": [at.get(sid, 0) for sid, _ in validation],
                "y": [score for _, score in validation],
                "text": [sid for sid, _ in validation],
                "marker": {"size": 14, "symbol": "diamond", "color": COLOURS[1]},
                "legendrank": 3,
            }
        )
    if summary.assessment_score is not None and summary.selected:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "assessment of the selected (hidden)",
                "x": [at.get(summary.selected, 0)],
                "y": [summary.assessment_score],
                "text": [summary.selected],
                "marker": {"size": 18, "symbol": "star", "color": COLOURS[2]},
                "legendrank": 4,
            }
        )
    shapes, notes = [], []
    for name, value, colour in (
        ("baseline", summary.baseline_score, "#868e96"),
        ("reference", summary.reference_score, "#2b8a3e"),
    ):
        if value is not None:
            shapes.append(
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": value,
                    "y1": value,
                    "line": {"dash": "dash", "color": colour, "width": 1},
                }  # fmt: skip
            )
            notes.append(
                {
                    "xref": "paper",
                    "x": 1,
                    "y": value,
                    "text": name,
                    "showarrow": False,
                    "xanchor": "right",
                    "yanchor": "bottom",
                    "font": {"color": colour},
                }  # fmt: skip
            )
    data = data[2:] + data[:2]  # public scores drawn last: on top of the larger hidden marks
    layout = {
        "title": {"text": "Learning curve"},
        "xaxis": {"title": {"text": "episodes spent"}, "rangemode": "tozero"},
        "yaxis": {"title": {"text": "score"}},
        "shapes": shapes,
        "annotations": notes,
        "margin": {"t": 50, "r": 20},
        "legend": {"orientation": "h", "y": -0.2},
    }
    return chart("learning-curve", figure(data, layout))


def _failures(subs: list[SubmissionRecord]) -> str:
    done = [s for s in subs if s.state == "complete"]
    codes = sorted({c for s in done for c in s.failures})
    labels = [s.id for s in done]
    ok = [len(s.indices) - sum(s.failures.values()) for s in done]
    data: list[dict[str, Any]] = [
        {"type": "bar", "name": "ok", "x": labels, "y": ok, "marker": {"color": "#b2d8b8"}}
    ]
    for i, code in enumerate(codes):
        data.append(
            {
                "type": "bar",
                "name": code,
                "x": labels,
                "y": [s.failures.get(code, 0) for s in done],
                "marker": {"color": COLOURS[(i + 1) % len(COLOURS)]},
            }
        )
    layout = {
        "title": {"text": "Episodes by outcome, per submission"},
        "barmode": "stack",
        "xaxis": {"title": {"text": "submission"}, "type": "category"},
        "yaxis": {"title": {"text": "episodes"}},
        "margin": {"t": 50, "r": 20},
        "legend": {"orientation": "h", "y": -0.25},
    }
    return chart("failures", figure(data, layout))


def _feedback_html(doc: dict[str, Any]) -> str:
    episodes = doc["episode_summaries"]
    rows = [
        [
            esc(e["index"]),
            esc(e["status"]),
            esc(f"{e['episode_return']:.4g}"),
            esc(e["steps"]),
            esc(e.get("failure")),
            esc((e.get("message") or "")[:160]),
        ]
        for e in episodes[:EPISODE_ROWS]
    ]
    parts = [
        f"<p>{esc(doc['message'])}</p>",
        table(["episode", "status", "return", "steps", "failure", "message"], rows, {0, 2, 3}),
    ]
    if len(episodes) > EPISODE_ROWS:
        parts.append(f"<p>... and {len(episodes) - EPISODE_ROWS} more episodes</p>")
    if doc["metrics"]:
        metrics = json.dumps(doc["metrics"], indent=1, sort_keys=True)
        parts.append(f"<details><summary>task metrics</summary><pre>{esc(metrics)}</pre></details>")
    shown: set[str] = set()
    for e in episodes:
        tb = e.get("traceback")
        if tb and tb not in shown and len(shown) < TRACEBACKS:
            shown.add(tb)
            parts.append(f"<p>traceback of episode {esc(e['index'])}:</p><pre>{esc(tb)}</pre>")
    return "\n".join(parts)


def _replays(
    store: Store, run_id: str, sub: SubmissionRecord, doc: dict[str, Any], budget: list[int]
) -> str:
    parts = []
    for trace in doc["traces"]:
        for name in trace.get("artifacts", []):
            if not name.endswith(".gif"):
                continue
            where = f"episode-{trace['index']}/{name}"
            data = store.read_artifact(run_id, sub.id, where)
            if data is None:
                continue
            if len(data) > budget[0]:
                parts.append(
                    f"<p>replay of episode {esc(trace['index'])} not embedded (over the page's "
                    f"--embed-mb): runs/{esc(run_id)}/submissions/{esc(sub.id)}/artifacts/"
                    f"{esc(where)}</p>"
                )
                continue
            budget[0] -= len(data)
            src = "data:image/gif;base64," + base64.b64encode(data).decode()
            parts.append(
                f'<figure style="display:inline-block"><img class="replay" src="{src}" '
                f'alt="replay of episode {esc(trace["index"])}"><figcaption>episode '
                f"{esc(trace['index'])}</figcaption></figure>"
            )
    return "<h4>Replays</h4>" + "".join(parts) if parts else ""


def _hidden(store: Store, run_id: str, candidates: list[str]) -> dict[str, Any]:
    results = store.results(run_id)
    order = {c: i for i, c in enumerate(candidates)}
    validation = sorted(
        ((r.submission_id, r.score) for r in results if r.split == "validation"),
        key=lambda v: order.get(v[0], len(order)),
    )
    return {"validation": [(sid, score) for sid, score in validation if score is not None]}


def _outcome(summary: RunSummary, hidden: dict[str, Any], candidates: list[str]) -> str:
    conf = summary.confinement
    conf_tag = "good" if conf == "confined" else "warn"
    status_tag = "good" if summary.status == "complete" else "bad"
    rows = [
        [
            "task",
            f"{esc(summary.task_id)} ({esc(summary.task_title)}), family {esc(summary.family)}",
        ],
        ["agent", esc(agent_label(summary.agent, summary.model, summary.effort))],
        ["confinement", f'<span class="tag {conf_tag}">{esc(conf)}</span>'],
        [
            "status",
            f'<span class="tag {status_tag}">{esc(summary.status)}</span> '
            + esc(summary.problem or ""),
        ],  # fmt: skip
        [
            "budget used",
            f"{summary.episodes_used}/{summary.episodes_budget} episodes, "
            f"{summary.submissions}/{summary.submissions_budget} submissions",
        ],  # fmt: skip
        [
            "wall time",
            esc(None if summary.wall_seconds is None else f"{summary.wall_seconds:.1f} s"),
        ],
        [
            "candidates",
            esc(", ".join(candidates) or None)
            + (" (fallback: the agent did not finalize)" if summary.fallback else ""),
        ],  # fmt: skip
        ["selected", esc(summary.selected)],
        ["public score", _n(summary.public_score)],
        ['<span class="hidden">validation (hidden)</span>', _n(summary.validation_score)],
        ['<span class="hidden">assessment (hidden)</span>', _n(summary.assessment_score)],
        ["normalised", esc(None if summary.normalised is None else f"{summary.normalised:.3f}")],
    ]
    if summary.input_tokens is not None:
        cost = "" if summary.cost_usd is None else f", ${summary.cost_usd:.2f}"
        rows.append(["tokens", f"{summary.input_tokens} in, {summary.output_tokens} out{cost}"])
    for sid, score in hidden["validation"]:
        rows.append([f'<span class="hidden">validation of {esc(sid)}</span>', _n(score)])
    return table(["", ""], rows)


def run_html(store: Store, run_id: str, *, embed_bytes: int = 20 << 20) -> str | None:
    summary = summarize(store, run_id)
    run = store.get_run(run_id)
    if summary is None or run is None:
        return None
    subs = store.list_submissions(run_id)
    candidates = list(run.candidates or [])
    hidden = _hidden(store, run_id, candidates)
    redact = redactor(store)
    budget = [embed_bytes]
    first = [summary.selected, *candidates]
    replay_order = sorted(subs, key=lambda s: (s.id not in first, -s.ordinal))
    replays = {}
    docs: dict[str, dict[str, Any]] = {}
    for sub in subs:
        fb = read_feedback(store, run_id, sub.id) if sub.state == "complete" else None
        if fb is not None:
            docs[sub.id] = feedback_document(fb, redact)
    for sub in replay_order:
        if sub.id in docs:
            replays[sub.id] = _replays(store, run_id, sub, docs[sub.id], budget)
    sections = []
    previous: dict[str, bytes] = {}
    for sub in subs:
        files = program_files(store, sub.program_digest)
        tags = "".join(
            f'<span class="tag {cls}">{label}</span>'
            for label, cls, on in (
                ("selected", "good", sub.id == summary.selected),
                ("candidate", "", sub.id in candidates),
                ("host fault: not charged", "warn", sub.state == "refunded"),
            )
            if on
        )
        score = "-" if sub.score is None else f"{sub.score:.4g}"
        head = (
            f"{esc(sub.id)} &middot; episodes {esc(sub.selector)} &middot; score {esc(score)} "
            f"&middot; {esc(sub.policy_failures or 0)} failures {tags}"
        )
        doc = docs.get(sub.id)
        parts = [
            f"<h4>Program {esc(sub.program_digest[:12])}: changes from the previous submission</h4>",
            _diff_html(program_diff(previous, files)),
        ]
        if doc is not None:
            parts += [
                "<h4>Feedback the agent saw</h4>",
                _feedback_html(doc),
                replays.get(sub.id, ""),
            ]
        elif sub.message:
            parts.append(f"<p>{esc(sub.message)}</p>")
        opened = " open" if sub.id == summary.selected else ""  # the one that counts
        sections.append(f"<details{opened}><summary>{head}</summary>{''.join(parts)}</details>")
        previous = files
    done = any(s.state == "complete" for s in subs)
    body = "\n".join(
        [
            f"<h1>Run {esc(run_id)}</h1>",
            f'<p class="sub">{esc(summary.task_title)} &middot; {esc(summary.direction)} '
            "&middot; hidden results are the operator's: the agent never saw them</p>",
            "<h2>Outcome</h2>",
            _outcome(summary, hidden, candidates),
            "<h2>Learning curve</h2>",
            _curve(summary, subs, hidden) if done else "<p>no complete submission</p>",
            "<h2>Failures over time</h2>",
            _failures(subs) if done else "<p>no complete submission</p>",
            f"<h2>Submissions ({len(subs)})</h2>",
            *sections,
        ]
    )
    return page(f"evopolicy-mcp run {run_id}", body)
