"""The compact form an agent reads, and results bounded by its size.

Every agent view is written as compact JSON without the fields that hold
their default (a null, a false flag, an empty list): :func:`compact` is that
document and :func:`compact_text` its text. A tool result an agent reads by
default stays within :data:`RESULT_CHARS` of that text; what does not fit is
left to the next page, and the result says how to ask for it.

::

    >>> view = largest_fit(lambda n: make_page(items[:n]), len(items), RESULT_CHARS)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["RESULT_CHARS", "compact", "compact_text", "largest_fit"]

# Agent CLIs keep a tool result in the conversation; this keeps one under ~3,000 tokens.
RESULT_CHARS = 10_000

V = TypeVar("V", bound=BaseModel)


def compact(view: BaseModel) -> dict[str, Any]:
    """The view as a JSON document without the fields that hold their default."""
    return view.model_dump(mode="json", exclude_defaults=True)


def compact_text(view: BaseModel) -> str:
    return json.dumps(compact(view), separators=(",", ":"), ensure_ascii=False)


def largest_fit(
    build: Callable[[int], V], most: int, max_chars: int | None, *, least: int = 1
) -> V:
    """``build(n)`` for the largest ``n`` in ``least..most`` whose compact text fits
    ``max_chars`` (``build(least)`` when none does; ``build(most)`` when unbounded).

    ``build(n)`` must grow with ``n`` (a page of the first ``n`` items)."""
    if max_chars is None or most <= least:
        return build(most)
    top = build(most)
    if len(compact_text(top)) <= max_chars:
        return top
    best: V | None = None
    low, high = least, most - 1
    while low <= high:
        mid = (low + high) // 2
        candidate = build(mid)
        if len(compact_text(candidate)) <= max_chars:
            best, low = candidate, mid + 1
        else:
            high = mid - 1
    return best if best is not None else build(least)
