"""Change points of one series: candidates from ``ruptures`` (PELT over the entries' values
on the interval's scale), each kept only when a permutation test confirms it.

``ruptures`` proposes; it does not test. Its penalty is ``PENALTY * sigma^2 * log(n)``,
``sigma`` the series' noise estimated from successive differences (median absolute
deviation, so a step does not inflate it). Each candidate is then tested on its two
neighbouring segments: the permutation p-value of their largest standardized CUSUM
(:func:`cusum_p_value`; the search over every split is inside the null distribution, so
choosing where to split costs no false alarm), at ``(1 - confidence) / m`` over the series'
``m`` candidates (Bonferroni). The weakest candidate that fails is dropped, its segments
merged, and the rest tested again, until every one stands. A single deviating newest entry
cannot be confirmed (it could have been anywhere); a step shows at its second entry.

A confirmed change is placed where its segments split best (the CUSUM's maximum) and
attributed to the first entry after it, with its size (relative, or points) and interval at
the same level over the segments' server starts: Welch
(:func:`bench.compare.intervals.estimate`) when both have two starts or more, else a
prediction interval of the one start against the other segment's spread. A change whose
interval holds no change is dropped too (the one that holds it most first, its segments
merged, the rest measured again): on 8 real same-build runs, 6 of 220 series had a
confirmed change (tail percentiles), every one with such an interval. A change is regressed
or improved when it is beyond the metric's threshold in that direction; otherwise a change
within the threshold.

A series whose every entry repeated one value exactly (at least two repetitions each: a
deterministic quantity such as the hit rate of a serial run) has no noise to test against:
each difference between successive entries is a change, exact, as ``compare`` states it.

Why ``ruptures``: it needs only numpy and scipy. Apache Otava 0.8.0 (E-divisive with its own
significance test) pins ``numpy==2.2.0.*`` and installs BigQuery, Postgres and Slack
clients; its test does not know server starts either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import ruptures
from scipy.special import stdtrit

from bench.compare.intervals import estimate, exact, scale, start_values, unscale
from bench.compare.samples import GroupKey
from bench.registry import Metric
from bench.trends.series import Entry, pooled
from bench.vocab import IMPROVED, REGRESSED

#: ruptures' penalty, in units of sigma^2 log(n): high enough that a same-build series
#: rarely proposes a candidate; the test decides (see tests/trends/test_changes.py).
PENALTY = 2.0
#: Permutations of a segment's entries for its CUSUM test.
PERMUTATIONS = 999
#: A significant change within the metric's threshold.
WITHIN = "changed within the threshold"


@dataclass(frozen=True)
class Change:
    """A change point: ``index`` the first entry after it."""

    index: int
    change: float  # a fraction (relative metrics) or points
    low: float | None  # None: neither side had two server starts
    high: float | None
    state: str  # REGRESSED | IMPROVED | WITHIN

    def to_dict(self) -> dict:
        return {"entry": self.index, "change": self.change, "low": self.low,
                "high": self.high, "state": self.state}


def noise(y: np.ndarray) -> float:
    """The series' per-entry noise from successive differences, robust to steps."""
    if y.size < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def candidates(y: np.ndarray) -> list[int]:
    """Where ruptures' PELT splits ``y`` (positions into ``y``, each the first of a new
    segment)."""
    if y.size < 2:
        return []
    sigma = noise(y)
    pen = max(PENALTY * sigma ** 2 * math.log(y.size), 1e-12)
    return [b for b in ruptures.Pelt(model="l2", min_size=1, jump=1).fit(y).predict(pen=pen)
            if b < y.size]


def _cusum(v: np.ndarray) -> np.ndarray:
    """Per split k (1..n-1) of the last axis: |mean after - mean before| sqrt(k(n-k)/n)."""
    n = v.shape[-1]
    ks = np.arange(1, n)
    c = np.cumsum(v, axis=-1)[..., :-1]
    return (np.abs(c / ks - (v.sum(axis=-1, keepdims=True) - c) / (n - ks))
            * np.sqrt(ks * (n - ks) / n))


def cusum_p_value(y: np.ndarray, permutations: int = PERMUTATIONS) -> float:
    """Whether ``y`` (one segment's entries) holds a change anywhere: the permutation
    p-value of its largest standardized CUSUM (the search over every split is in the
    null distribution, so choosing where to split costs no false alarms)."""
    if y.size < 2:
        return 1.0
    def stat(v: np.ndarray) -> np.ndarray:
        return np.max(_cusum(v), axis=-1)

    rng = np.random.default_rng(0)  # the same series always gets the same answer
    null = stat(rng.permuted(np.tile(y, (permutations, 1)), axis=1))
    return float((1 + np.sum(null >= stat(y) - 1e-12)) / (permutations + 1))


def _interval(metric: Metric, before: list[Entry], after: list[Entry], key: GroupKey,
              level: float, min_requests: int) -> tuple[float, float | None, float | None]:
    """The change from ``before`` to ``after`` on the interval's scale and its interval at
    ``level`` over their server starts (bounds None when neither has two)."""
    b = pooled([e.side.groups[key] for e in before])
    a = pooled([e.side.groups[key] for e in after])
    xb, xa = start_values(metric, b, min_requests), start_values(metric, a, min_requests)
    d = float(xa.mean() - xb.mean())
    if xb.size >= 2 and xa.size >= 2:
        est = estimate(metric, b, a, level=level, min_requests=min_requests)
        if est.low is None or est.high is None:
            return d, None, None
        return d, scale(metric, est.low), scale(metric, est.high)
    many = xb if xb.size >= 2 else xa
    if many.size < 3:
        return d, None, None
    se = float(many.std(ddof=1)) * math.sqrt(1 / xb.size + 1 / xa.size)
    half = float(stdtrit(many.size - 1, (1 + level) / 2)) * se
    return d, d - half, d + half


def _state(metric: Metric, change: float, threshold: float | None) -> str:
    """Regressed (improved) when the change (whose interval, where it has one, excludes no
    change) is beyond the threshold in the bad (good) direction."""
    worse = metric.worse(change)
    if threshold is not None and worse > threshold:
        return REGRESSED
    if threshold is not None and -worse > threshold:
        return IMPROVED
    return WITHIN


def _exact_change(metric: Metric, entry: Entry, d: float, threshold: float | None) -> Change:
    """A change between two entries that each repeated one value exactly."""
    change = unscale(metric, d)
    return Change(entry.index, change, change, change, _state(metric, change, threshold))


def changes(metric: Metric, entries: list[Entry], key: GroupKey, threshold: float | None,
            confidence: float = 0.95, min_requests: int = 1) -> list[Change]:
    """The change points of ``metric`` for ``key`` across ``entries`` (in order)."""
    have = [e for e in entries if key in e.side.groups
            and start_values(metric, e.side.groups[key], min_requests).size]
    if len(have) < 2:
        return []
    y = np.asarray([start_values(metric, e.side.groups[key], min_requests).mean()
                    for e in have])
    if all(exact(metric, e.side.groups[key], min_requests) for e in have):
        return [_exact_change(metric, have[i], float(y[i] - y[i - 1]), threshold)
                for i in range(1, len(have)) if y[i] != y[i - 1]]
    cuts = candidates(y)
    while True:  # drop the weakest unconfirmed candidate, merge its segments, test again
        alpha = (1 - confidence) / max(len(cuts), 1)
        bounds = [0, *cuts, len(have)]
        p = [cusum_p_value(y[bounds[i - 1]:bounds[i + 1]]) for i in range(1, len(bounds) - 1)]
        if all(v < alpha for v in p):
            break
        cuts.pop(int(np.argmax(p)))
    # each confirmed change where its two segments split best (the CUSUM's maximum)
    for i in range(len(cuts)):
        lo, hi = ([0, *cuts, len(have)][j] for j in (i, i + 2))
        cuts[i] = lo + 1 + int(np.argmax(_cusum(y[lo:hi])))
    while True:  # drop the change whose interval holds no change the most, then again
        level = 1 - (1 - confidence) / max(len(cuts), 1)
        bounds = [0, *cuts, len(have)]
        found = [_interval(metric, have[bounds[i - 1]:cut], have[cut:bounds[i + 1]], key,
                           level, min_requests) for i, cut in enumerate(cuts, 1)]
        holding = [abs(d) / (high - low) if low is not None and high is not None
                   and low <= 0 <= high and high > low else None for d, low, high in found]
        if all(h is None for h in holding):
            break
        cuts.pop(min((h, i) for i, h in enumerate(holding) if h is not None)[1])
    return [Change(have[cut].index, unscale(metric, d),
                   None if low is None else unscale(metric, low),
                   None if high is None else unscale(metric, high),
                   _state(metric, unscale(metric, d), threshold))
            for cut, (d, low, high) in zip(cuts, found)]
