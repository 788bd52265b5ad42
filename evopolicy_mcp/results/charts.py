"""Self-contained HTML pages with Plotly charts: the frame every results page shares.

Figures are built with ``plotly.graph_objects`` and drawn by the ``plotly.min.js``
that the ``plotly`` wheel ships, inlined once per page (about 4.8 MB), so a page
opens offline, from a file or an e-mail, and nothing is fetched when it loads.
Every text from the records is escaped; figure JSON is escaped for ``<script>``.
"""

from __future__ import annotations

import html
import json
from typing import Any

from evopolicy_mcp.results.extras import require

__all__ = ["chart", "esc", "figure", "page", "table"]

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1180px;
       color: #1d2330; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.sub { color: #5b6475; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border-bottom: 1px solid #e3e6ec; padding: 3px 10px 3px 0; text-align: left;
         vertical-align: top; }
th { color: #5b6475; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.chart { width: 100%; height: 380px; }
details { border: 1px solid #e3e6ec; border-radius: 6px; margin: 6px 0; padding: 4px 10px; }
summary { cursor: pointer; font-weight: 600; }
pre { background: #f6f7f9; padding: 8px; overflow-x: auto; font-size: 12px; max-height: 420px; }
pre .add { color: #116329; } pre .del { color: #a40e26; } pre .hunk { color: #6639ba; }
.tag { display: inline-block; padding: 0 6px; border-radius: 4px; font-size: 12px;
       background: #eef0f4; margin-right: 4px; }
.warn { background: #fff1c2; } .bad { background: #ffd9d9; } .good { background: #d8f5dd; }
.hidden { color: #8a4b00; }
img.replay { width: 256px; height: auto; image-rendering: pixelated; border: 1px solid #e3e6ec;
             margin: 4px 8px 4px 0; }
"""


def esc(value: object) -> str:
    return html.escape("-" if value is None else str(value))


def figure(data: list[Any], layout: dict[str, Any]) -> dict[str, Any]:
    """A figure validated by ``plotly.graph_objects``, as the JSON Plotly.js draws."""
    go = require("plotly.graph_objects", "the HTML report")
    pio = require("plotly.io", "the HTML report")
    fig = go.Figure(data=data, layout=layout)
    result: dict[str, Any] = json.loads(pio.to_json(fig, validate=True))
    return result


def _script_json(value: Any) -> str:
    text = json.dumps(value)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def chart(div_id: str, fig: dict[str, Any]) -> str:
    """A div and the script that draws ``fig`` into it."""
    config = {"responsive": True, "displaylogo": False}
    return (
        f'<div id="{esc(div_id)}" class="chart"></div>\n<script>Plotly.newPlot('
        f"{_script_json(div_id)}, {_script_json(fig.get('data', []))}, "
        f"{_script_json(fig.get('layout', {}))}, {_script_json(config)});</script>"
    )


def table(header: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    """An HTML table; cells are already HTML (escape with :func:`esc`)."""
    numeric = numeric or set()
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, body: str) -> str:
    offline = require("plotly.offline", "the HTML report")
    js = offline.get_plotlyjs()
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{CSS}</style>"
        f"<script>{js}</script></head>\n<body>\n{body}\n</body></html>\n"
    )
