"""Means with 95% intervals over repeats (Student's t), in the standard library only.

The interval is ``mean +- t(0.975, n-1) * s / sqrt(n)`` with ``s`` the sample
standard deviation; one repeat has no interval. The t quantile is found by
bisection on the exact Student t distribution for integer degrees of freedom
(closed forms in the angle ``atan(t / sqrt(df))``), so no table is needed:

>>> round(t_quantile(4), 3), round(t_quantile(1), 3), round(t_quantile(1000), 2)
(2.776, 12.706, 1.96)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Interval", "mean_interval", "t_quantile"]


def _central(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with ``df`` degrees of freedom (t >= 0)."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        total, term = 0.0, 1.0
        for k in range(1, (df - 1) // 2 + 1):
            if k > 1:
                term *= c2 * (2 * k - 2) / (2 * k - 1)
            total += term
        tail = math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0
        return 2 / math.pi * (theta + tail)
    total, term = 1.0, 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided critical value: P(|T| < t) = ``level``."""
    if df < 1:
        raise ValueError("degrees of freedom must be at least 1")
    lo, hi = 0.0, 1.0
    while _central(hi, df) < level:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if _central(mid, df) < level:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Interval:
    n: int
    mean: float | None
    low: float | None  # None with fewer than two values
    high: float | None
    stdev: float | None


def mean_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    n = len(values)
    if n == 0:
        return Interval(0, None, None, None, None)
    mean = statistics.fmean(values)
    if n == 1:
        return Interval(1, mean, None, None, None)
    s = statistics.stdev(values)
    half = t_quantile(n - 1, level) * s / math.sqrt(n)
    return Interval(n, mean, mean - half, mean + half, s)
