"""Tokens and cost of an agent's session, read from what its CLI printed.

The launcher keeps the CLI's stdout in ``runs/RUN/agent/stdout.jsonl``. Two
shapes carry usage, and only these are read:

- Claude Code and Qoder (``--output-format stream-json``): the last line of
  type ``result`` holds the session's totals: ``usage`` with ``input_tokens``
  (not cached), ``cache_creation_input_tokens``, ``cache_read_input_tokens``,
  ``output_tokens``, and ``total_cost_usd``.
- Codex (``exec --json``): each ``turn.completed`` line holds that turn's
  ``usage``: ``input_tokens`` (cached ones included), ``cached_input_tokens``,
  ``output_tokens``; no cost. Turns are added up.

Whatever the source, :class:`TokenUsage` counts ``input_tokens`` as every
input token (cache reads and writes included), ``cached_input_tokens`` as the
cache reads among them, and ``output_tokens``. A CLI that reports nothing
(Kimi Code, the scripted agent, a session that failed) gives ``None``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TokenUsage", "read_usage"]

_MAX_LINE = 4 << 20  # a longer line (a huge tool result) holds no usage worth the parse


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    cost_usd: float | None
    source: str  # "result" (Claude Code, Qoder) or "turns" (Codex)


def _int(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def read_usage(stdout: Path) -> TokenUsage | None:
    """The session's usage from a CLI's stdout file, or None when it reports none."""
    result: TokenUsage | None = None
    turns = [0, 0, 0]
    seen_turn = False
    try:
        fh = stdout.open("rb")
    except OSError:
        return None
    with fh:
        for raw in fh:
            if len(raw) > _MAX_LINE or b'"usage"' not in raw:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict) or not isinstance(line.get("usage"), dict):
                continue
            usage = line["usage"]
            if line.get("type") == "result":
                cost = line.get("total_cost_usd", line.get("cost_usd"))
                cache_read = _int(usage, "cache_read_input_tokens")
                result = TokenUsage(
                    input_tokens=_int(usage, "input_tokens")
                    + _int(usage, "cache_creation_input_tokens")
                    + cache_read,
                    cached_input_tokens=cache_read,
                    output_tokens=_int(usage, "output_tokens"),
                    cost_usd=float(cost) if isinstance(cost, int | float) else None,
                    source="result",
                )
            elif line.get("type") == "turn.completed":
                seen_turn = True
                turns[0] += _int(usage, "input_tokens")
                turns[1] += _int(usage, "cached_input_tokens")
                turns[2] += _int(usage, "output_tokens")
    if result is not None:
        return result
    if seen_turn:
        return TokenUsage(turns[0], turns[1], turns[2], None, "turns")
    return None
