"""Intervals of a metric's change between two sides, over server starts.

Each server start shifts timings by its own offset (here two starts of one build differ
by about 25% in median TTFT), and every repetition of a run shares its run's start, so the
server start is the unit: a side is one run or a set of runs, each on its own start.
Each repetition gives one value of the metric (its requests reduced: mean, median, P99 or
ratio; or its per-pass value); on the interval's scale (logarithms for relative metrics,
percentage points for rates) a start's repetitions are averaged into one value per start.
The change is a Welch t interval on the difference of the two sides' means of those start
values (degrees of freedom from the starts); the point change is the ratio of geometric
means (or the difference in points), every start weighing the same. A start's variance is
never taken below what its repetitions' own spread implies (pooled within starts, over its
repetitions). When every repetition of both sides gave the same value (a deterministic
rate), the change is exact, whatever the number of starts. Otherwise a side with fewer
than :data:`MIN_STARTS` starts gets no interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit

from bench.compare.samples import Group
from bench.registry import MEAN, MEDIAN, P99, POINTS, RATIO, ZERO, Metric

#: Server starts per side an interval needs (a start-to-start spread needs two values).
MIN_STARTS = 2
#: Largest start count :func:`starts_needed` considers, and those it tries.
MAX_STARTS = 1000
_CANDIDATES = np.unique(np.geomspace(MIN_STARTS, MAX_STARTS, 80).round())


@dataclass(frozen=True)
class Estimate:
    """Base and new values, the change (a fraction or points) and its interval."""

    base: float | None  # mean over starts (geometric for relative metrics)
    new: float | None
    change: float | None
    low: float | None
    high: float | None
    n_base: int  # server starts with a value (leaked tokens: passes)
    n_new: int
    #: Per-start standard deviations of each side on the interval's scale (log for relative
    #: metrics, points for rates); ``None`` with fewer than two starts on that side.
    sd_base: float | None = None
    sd_new: float | None = None
    reps_base: int = 0  # repetitions with a value
    reps_new: int = 0
    #: The change's standard error on the interval's scale and its degrees of freedom
    #: (``None`` without an interval; 0 when exact).
    se: float | None = None
    df: float | None = None


def reduce(metric: Metric, columns: dict[str, np.ndarray]) -> np.ndarray:
    """The metric over the last axis of its columns (NaN: a value the request lacks)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        first = columns[metric.columns[0]]
        if metric.reducer in (MEAN, MEDIAN, P99):
            q = {MEAN: None, MEDIAN: 50, P99: 99}[metric.reducer]
            if np.isnan(first).any():  # the nan-functions are much slower along an axis
                return np.nanmean(first, axis=-1) if q is None else np.nanpercentile(first, q, axis=-1)
            return np.mean(first, axis=-1) if q is None else np.percentile(first, q, axis=-1)
        if metric.reducer == RATIO:
            return np.nansum(first, axis=-1) / np.nansum(columns[metric.columns[1]], axis=-1)
    raise ValueError(f"{metric.name}: unknown reducer {metric.reducer!r}")


def change(metric: Metric, base: np.ndarray | float, new: np.ndarray | float):
    """Relative change (``new / base - 1``) or the difference in percentage points."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if metric.change == POINTS:
            return (np.asarray(new) - np.asarray(base)) * 100.0
        return np.asarray(new) / np.asarray(base) - 1.0


def scale(metric: Metric, change_value: float) -> float:
    """A change on the interval's scale: log ratio (relative) or points (unchanged)."""
    return change_value if metric.change == POINTS else math.log1p(change_value)


def unscale(metric: Metric, d: float) -> float:
    return d if metric.change == POINTS else math.expm1(d)


def repetition_values(metric: Metric, group: Group, min_requests: int = 1
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The metric per repetition (those with a value and, for per-request metrics, at least
    ``min_requests`` requests that have one; relative metrics: positive values only) and
    the server start of each (kept on the group: a group only grows, so its size is part
    of the key)."""
    key = (metric.name, min_requests, len(group.rows), len(group.requests))
    if key not in group.memo:
        group.memo[key] = _repetition_values(metric, group, min_requests)
    return group.memo[key]


def _repetition_values(metric: Metric, group: Group, min_requests: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    values = []
    if metric.per_request:
        for rep in group.requests:
            cols = {c: rep[c] for c in metric.columns}
            keep = ~np.any([np.isnan(v) for v in cols.values()], axis=0)
            if not keep.all():
                cols = {c: v[keep] for c, v in cols.items()}
            values.append(float(reduce(metric, cols)) if keep.sum() >= max(min_requests, 1)
                          else np.nan)
    else:
        values = [np.nan if row.get(metric.name) is None else row[metric.name]
                  for row in group.rows]
    v = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & ((v > 0) if metric.change != POINTS else True)
    return v[ok], np.asarray(group.starts, dtype=int)[ok]


@dataclass(frozen=True)
class _Side:
    """One side's values on the interval's scale: per repetition, then per start."""

    reps: np.ndarray
    means: np.ndarray  # one per start
    var: float  # of one start's value; NaN with fewer than two starts

    @property
    def center(self) -> float:
        return float(self.means.mean()) if self.means.size else math.nan

    @property
    def constant(self) -> bool:
        """At least two repetitions, all of one value."""
        return self.reps.size >= 2 and bool(np.ptp(self.reps) == 0)


def _side(metric: Metric, group: Group, min_requests: int) -> _Side:
    """Per-start means of the repetitions on the interval's scale and the variance of a
    start's value: that of the start means, at least the within-start spread over a start's
    repetitions."""
    values, starts = repetition_values(metric, group, min_requests)
    y = values * 100.0 if metric.change == POINTS else np.log(values)
    ids, index, counts = np.unique(starts, return_inverse=True, return_counts=True)
    means = np.bincount(index, weights=y, minlength=ids.size) / np.maximum(counts, 1)
    if ids.size < MIN_STARTS:
        return _Side(y, means, math.nan)
    within_df = y.size - ids.size
    within = float(((y - means[index]) ** 2).sum() / within_df) if within_df else 0.0
    return _Side(y, means, max(float(means.var(ddof=1)), within * ids.size / y.size))


def start_values(metric: Metric, group: Group, min_requests: int = 1) -> np.ndarray:
    """The group's value per server start on the interval's scale (its repetitions'
    mean)."""
    return _side(metric, group, min_requests).means


def exact(metric: Metric, group: Group, min_requests: int = 1) -> bool:
    """Whether the group's every repetition (at least two) gave one value: a deterministic
    quantity, compared exactly (as :func:`estimate` does)."""
    return _side(metric, group, min_requests).constant


def _value(metric: Metric, side: _Side) -> float | None:
    """The side's value: geometric mean over starts (relative metrics) or mean (rates)."""
    if not side.means.size:
        return None
    return side.center / 100.0 if metric.change == POINTS else math.exp(side.center)


def welch(a: _Side, b: _Side, level: float) -> tuple[float, float, float, float, float]:
    """Mean of ``b`` minus mean of ``a`` over starts, its two-sided Welch t interval at
    ``level`` (each side of at least two starts), standard error and degrees of freedom;
    exact when neither varies."""
    d = b.center - a.center
    va, vb = a.var / a.means.size, b.var / b.means.size
    se2 = va + vb
    if se2 == 0:
        return d, d, d, 0.0, math.inf
    df = se2 ** 2 / (va ** 2 / (a.means.size - 1) + vb ** 2 / (b.means.size - 1))
    half = float(stdtrit(df, (1 + level) / 2) * math.sqrt(se2))
    return d, d - half, d + half, math.sqrt(se2), float(df)


def starts_needed(half_width: float, sd_base: float, sd_new: float, level: float) -> int | None:
    """About how many server starts per side bring the Welch interval's half width (on its
    scale) below ``half_width`` at these per-start spreads (it scales as t(df) / sqrt(k));
    ``None`` beyond :data:`MAX_STARTS` or when nothing can."""
    v = sd_base ** 2 + sd_new ** 2
    if half_width <= 0 or v <= 0:
        return None
    k = _CANDIDATES
    df = (k - 1) * v ** 2 / (sd_base ** 4 + sd_new ** 4)  # Welch's, both sides k starts
    fits = stdtrit(df, (1 + level) / 2) * np.sqrt(v / k) < half_width
    return int(k[fits.argmax()]) if fits.any() else None


def estimate(metric: Metric, base: Group, new: Group, *, level: float,
             min_requests: int = 1) -> Estimate:
    """Base, new, change and its interval at ``level`` (see the module docstring)."""
    if metric.better == ZERO:  # a count that must stay 0: the totals, no interval
        totals = []
        for group in (base, new):
            v = np.asarray([np.nan if r.get(metric.name) is None else r[metric.name]
                            for r in group.rows], dtype=float)
            v = v[~np.isnan(v)]
            totals.append((float(v.sum()) if v.size else None, int(v.size)))
        (b, nb), (n, nn) = totals
        return Estimate(b, n, None, None, None, nb, nn)
    bs, ns = _side(metric, base, min_requests), _side(metric, new, min_requests)
    b_value, n_value = _value(metric, bs), _value(metric, ns)
    sd = [None if math.isnan(s.var) else math.sqrt(s.var) for s in (bs, ns)]
    counts = (bs.means.size, ns.means.size, *sd, bs.reps.size, ns.reps.size)
    if bs.constant and ns.constant:
        d = ns.center - bs.center
        return Estimate(b_value, n_value, unscale(metric, d), unscale(metric, d),
                        unscale(metric, d), *counts)
    if b_value is None or n_value is None or min(bs.means.size, ns.means.size) < MIN_STARTS:
        point = (None if b_value is None or n_value is None
                 else unscale(metric, ns.center - bs.center))
        return Estimate(b_value, n_value, point, None, None, *counts)
    d, low, high, se, df = welch(bs, ns, level)
    return Estimate(b_value, n_value, unscale(metric, d), unscale(metric, low),
                    unscale(metric, high), *counts, se=se, df=df)


def interval(metric: Metric, group: Group, *, level: float, min_requests: int = 1
             ) -> tuple[float | None, float | None, float | None]:
    """One side's value (as :func:`estimate` states it) and its t interval at ``level``
    over server starts; bounds ``None`` with fewer than two starts (unless every repetition
    gave the same value), all ``None`` without a value."""
    side = _side(metric, group, min_requests)
    value = _value(metric, side)
    if value is None:
        return None, None, None
    if side.constant:
        return value, value, value
    if side.means.size < MIN_STARTS:
        return value, None, None
    half = float(stdtrit(side.means.size - 1, (1 + level) / 2)
                 * math.sqrt(side.var / side.means.size))
    low, high = side.center - half, side.center + half
    if metric.change == POINTS:
        return value, low / 100.0, high / 100.0
    return value, math.exp(low), math.exp(high)
