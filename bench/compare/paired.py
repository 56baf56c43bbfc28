"""Paired estimates for an A/B (:mod:`bench.campaigns.ab`): both sides got the same
requests in the same unit (start pair, block, repetition), so each unit gives one change.

Per unit, on the interval's scale (log ratio, or percentage points for rates):

- per-request latencies are paired by request id: ``median`` metrics take the median of
  the per-request log ratios, ``mean`` metrics the log ratio of the two means over the
  paired requests, ``p99`` the log ratio of the two P99s; ratio metrics (mean ITL, hit
  rate) use the paired requests' sums;
- per-pass metrics (throughputs) take the log ratio of the two passes' values.

A row over several groups (a path's summary) averages its groups' unit changes per unit.

A start pair's change is the median of its units' changes (from 3 blocks on, a block that
a transient of the machine hit, 25% off in a same-build A/B here, does not move it; the
median of 2 is their mean); the change is the mean
over start pairs, its standard error from their spread (``df`` = start pairs - 1): valid
whatever the sizes of the start, block and request effects, since start pairs are
independent. Units are never pooled
across start pairs: with a start-to-start spread as large as the block-to-block one,
pooling when an F test finds no start effect ("sometimes pool") took a nominal 1% false
alarm to 3-4% in simulation, and the gate's intervals are at such levels.
:mod:`tests.compare.test_paired` measures the false-alarm and detection rates of the whole
procedure on simulated A/Bs with known start, block and request effects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as t_dist

from bench.compare.intervals import reduce
from bench.compare.samples import Group
from bench.registry import MEDIAN, POINTS, Metric

Unit = tuple[int, int, int]  # start pair, block, repetition


@dataclass(frozen=True)
class Paired:
    """A paired change on the interval's scale and what its interval is made of."""

    change: float
    se: float  # 0: every unit gave the same change (exact)
    df: float
    starts: int  # start pairs with a paired unit
    units: int
    sd_start: float | None  # of a start pair's mean change (None: one start pair)

    @property
    def exact(self) -> bool:
        return self.se == 0 and self.units >= 2

    def interval(self, level: float) -> tuple[float, float] | None:
        """Two-sided interval at ``level``; None without a spread to judge by."""
        if self.exact:
            return self.change, self.change
        if self.starts < 2 or not math.isfinite(self.se):
            return None
        half = float(t_dist.ppf((1 + level) / 2, self.df)) * self.se
        return self.change - half, self.change + half


def _values(metric: Metric, cols: dict[str, np.ndarray]) -> float:
    v = reduce(metric, cols)
    return float(v) * 100.0 if metric.change == POINTS else math.log(float(v))


@dataclass(frozen=True)
class Pair:
    """A unit both sides ran: its repetition on each side and the positions of the requests
    both sent (paired by request id)."""

    unit: Unit
    i: int  # base repetition
    j: int  # new repetition
    bi: np.ndarray
    ni: np.ndarray


def pairs(base: Group, new: Group) -> list[Pair]:
    """Every unit of ``new`` that ``base`` ran too, with its paired requests."""
    where = {u: i for i, u in enumerate(base.units)}
    out = []
    for j, unit in enumerate(new.units):
        if unit in where:
            i = where[unit]
            index = {rid: k for k, rid in enumerate(base.ids[i])}
            both = [(index[rid], k) for k, rid in enumerate(new.ids[j]) if rid in index]
            bi, ni = (np.asarray(x, dtype=int) for x in zip(*both)) if both else (
                np.zeros(0, int), np.zeros(0, int))
            out.append(Pair(unit, i, j, bi, ni))
    return out


def unit_change(metric: Metric, base: Group, new: Group, pair: Pair,
                min_requests: int = 1) -> float | None:
    """The change in ``pair``'s unit on the interval's scale; None where either side lacks
    a value."""
    if not metric.per_request:
        b, n = base.rows[pair.i].get(metric.name), new.rows[pair.j].get(metric.name)
        if b is None or n is None or (metric.change != POINTS and (b <= 0 or n <= 0)):
            return None
        return (n - b) * 100.0 if metric.change == POINTS else math.log(n / b)
    b = {c: base.requests[pair.i][c][pair.bi] for c in metric.columns}
    n = {c: new.requests[pair.j][c][pair.ni] for c in metric.columns}
    keep = np.all([np.isfinite(v) for v in (*b.values(), *n.values())], axis=0)
    if metric.change != POINTS:
        keep &= (b[metric.columns[0]] > 0) & (n[metric.columns[0]] > 0)
    if keep.sum() < max(min_requests, 1):
        return None
    if not keep.all():
        b = {c: v[keep] for c, v in b.items()}
        n = {c: v[keep] for c, v in n.items()}
    if metric.reducer == MEDIAN:
        return float(np.median(np.log(n[metric.columns[0]] / b[metric.columns[0]])))
    with np.errstate(invalid="ignore", divide="ignore"):
        try:
            return _values(metric, n) - _values(metric, b)
        except ValueError:  # log of a zero or negative reduction
            return None


def unit_changes(metric: Metric, base: Group, new: Group, paired: list[Pair],
                 min_requests: int = 1) -> dict[Unit, float]:
    """Per unit of ``paired``: the change on the interval's scale."""
    out = {}
    for pair in paired:
        d = unit_change(metric, base, new, pair, min_requests)
        if d is not None and math.isfinite(d):
            out[pair.unit] = d
    return out


def merged(groups: list[Group]) -> Group:
    """One group of the requests of ``groups``, unit by unit (request ids prefixed by the
    group's position: they stay unique and pair with the other side's merged group)."""
    units: dict[Unit, list[tuple[int, int]]] = {}
    for g, group in enumerate(groups):
        for r, unit in enumerate(group.units):
            units.setdefault(unit, []).append((g, r))
    out = Group()
    for unit, parts in units.items():
        columns = groups[parts[0][0]].requests[parts[0][1]].keys()
        out.requests.append({c: np.concatenate([groups[g].requests[r][c] for g, r in parts])
                             for c in columns})
        out.ids.append([f"{g}/{rid}" for g, r in parts for rid in groups[g].ids[r]])
        out.rows.append({})
        out.starts.append(unit[0])
        out.units.append(unit)
    return out


def averaged(per_group: list[dict[Unit, float]]) -> dict[Unit, float]:
    """Per unit: the mean change over the groups that have it."""
    units: dict[Unit, list[float]] = {}
    for changes in per_group:
        for unit, d in changes.items():
            units.setdefault(unit, []).append(d)
    return {u: float(np.mean(v)) for u, v in units.items()}


def combine(changes: dict[Unit, float]) -> Paired | None:
    """The change over units (see the module docstring); None without a unit."""
    if not changes:
        return None
    starts = sorted({u[0] for u in changes})
    index = np.asarray([starts.index(u[0]) for u in changes])
    d = np.asarray(list(changes.values()), dtype=float)
    means = np.asarray([np.median(d[index == i]) for i in range(len(starts))])
    change = float(means.mean())
    s, n = len(starts), d.size
    if n >= 2 and np.ptp(d) == 0:
        return Paired(change, 0.0, math.inf, s, n, 0.0 if s > 1 else None)
    if s < 2:
        return Paired(change, math.nan, 0.0, s, n, None)
    sd = float(means.std(ddof=1))
    return Paired(change, sd / math.sqrt(s), s - 1.0, s, n, sd)
