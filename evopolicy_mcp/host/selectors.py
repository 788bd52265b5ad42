"""Episode selectors: which training-pool indices a submission evaluates.

A selector is a comma-separated list of items, each an index ``7`` or a
half-open range ``4:8`` (4, 5, 6, 7). Indices are strictly increasing across
the whole selector, so an index appears at most once per submission::

    >>> parse_selector("0:2, 4:8", pool=10)
    [0, 1, 4, 5, 6, 7]

Spaces around items and around ``:`` are ignored. Everything else that is
not this grammar is rejected with a message saying how to write it, and
nothing is charged for a rejected selector. Bounds are checked before a range
is expanded, so ``0:99999999999`` costs no memory.
"""

from __future__ import annotations

import re

__all__ = ["MAX_SELECTOR_CHARS", "SelectorError", "format_indices", "parse_selector"]

MAX_SELECTOR_CHARS = 10_000
_NUMBER = re.compile(r"[0-9]+")
_MAX_DIGITS = 18
_EXAMPLE = "write indices and half-open ranges in increasing order, e.g. '0:5' or '0:2,4,7:9'"


class SelectorError(ValueError):
    """A selector was rejected. ``code`` is ``bad_selector`` or ``out_of_pool``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _bad(message: str) -> SelectorError:
    return SelectorError("bad_selector", f"{message}; {_EXAMPLE}")


def _out_of_pool(item: str, index: int | None, pool: int) -> SelectorError:
    where = f"reaches index {index}" if index is not None else "is far beyond every index"
    return SelectorError(
        "out_of_pool",
        f"item {item!r} {where}, outside the training pool; valid indices are "
        f"0..{pool - 1} (e.g. '0:{min(pool, 5)}')",
    )


def _number(text: str, item: str, pool: int) -> int:
    text = text.strip()
    if not text:
        raise _bad(f"item {item!r} has an empty side")
    if text.startswith("-"):
        raise _bad(f"item {item!r}: indices are never negative")
    if not _NUMBER.fullmatch(text):
        raise _bad(f"item {item!r}: {text!r} is not a whole number")
    # Bounded before int(): a pool index never needs more digits than this.
    if len(text.lstrip("0")) > _MAX_DIGITS:
        raise _out_of_pool(item, None, pool)
    return int(text)


def parse_selector(text: str, pool: int) -> list[int]:
    """The sorted pool indices ``text`` selects; raises :class:`SelectorError`."""
    if not isinstance(text, str):
        raise _bad("the selector must be a string")
    if len(text) > MAX_SELECTOR_CHARS:
        raise _bad(f"the selector is longer than {MAX_SELECTOR_CHARS} characters")
    if not text.strip():
        raise _bad("the selector is empty: choose at least one episode")
    last_end = 0  # every next index must be >= this
    spans: list[tuple[int, int]] = []
    for position, raw in enumerate(text.split(","), start=1):
        item = raw.strip()
        if not item:
            raise _bad(f"item {position} is empty (a doubled or trailing comma?)")
        parts = item.split(":")
        if len(parts) > 2:
            raise _bad(f"item {item!r} has more than one ':'")
        start = _number(parts[0], item, pool)
        end = _number(parts[1], item, pool) if len(parts) == 2 else start + 1
        if end <= start:
            if end == start:
                raise _bad(f"range {item!r} is empty (ranges are half-open: '3:5' is 3 and 4)")
            raise _bad(f"range {item!r} runs backwards")
        if spans and start < last_end:
            raise _bad(
                f"item {item!r} overlaps or comes before the previous item "
                "(indices must be strictly increasing)"
            )
        if end > pool:
            raise _out_of_pool(item, end - 1, pool)
        spans.append((start, end))
        last_end = end
    return [i for start, end in spans for i in range(start, end)]


def format_indices(indices: list[int] | tuple[int, ...]) -> str:
    """The shortest selector for sorted distinct ``indices`` (inverse of parsing)."""
    items: list[str] = []
    i = 0
    while i < len(indices):
        j = i
        while j + 1 < len(indices) and indices[j + 1] == indices[j] + 1:
            j += 1
        if j == i:
            items.append(str(indices[i]))
        else:
            items.append(f"{indices[i]}:{indices[j] + 1}")
        i = j + 1
    return ",".join(items)
