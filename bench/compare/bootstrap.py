"""Bootstrap intervals of a metric's change between two runs.

Per-request metrics resample hierarchically: repetitions with replacement, then requests
within each chosen repetition (with one repetition: requests only), so that both the
request-to-request and the run-to-run spread widen the interval. Per-pass metrics
(throughputs) resample repetitions only. Each side is resampled on its own; the interval
is the percentile interval of the change over the paired resamples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.compare.samples import Group
from bench.registry import MEAN, MEDIAN, P99, POINTS, RATIO, ZERO, Metric

#: Largest resample matrix built at once (values), so 100k-request groups stay bounded.
_CHUNK = 4_000_000


@dataclass(frozen=True)
class Estimate:
    """Base and new values, the change (a fraction or points) and its interval."""

    base: float | None
    new: float | None
    change: float | None
    low: float | None
    high: float | None
    n_base: int  # requests (per-request metrics) or repetitions (per-pass metrics)
    n_new: int


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


def _requests_resampled(reps: list[dict[str, np.ndarray]], metric: Metric, resamples: int,
                        rng: np.random.Generator) -> np.ndarray:
    """The metric over ``resamples`` hierarchical resamples of ``reps``."""
    n = np.asarray([len(rep[metric.columns[0]]) for rep in reps])
    width = int(n.max())
    padded = {c: np.full((len(reps), width), np.nan) for c in metric.columns}
    for i, rep in enumerate(reps):
        for c in metric.columns:
            padded[c][i, : n[i]] = rep[c]
    out = []
    step = max(1, _CHUNK // max(1, len(reps) * width))
    for start in range(0, resamples, step):
        b = min(step, resamples - start)
        chosen = rng.integers(0, len(reps), (b, len(reps)))
        # Every chosen repetition contributes ``width`` draws from its own requests.
        draws = (rng.random((b, len(reps), width)) * n[chosen][..., None]).astype(int)
        cols = {c: padded[c][chosen[..., None], draws].reshape(b, -1) for c in metric.columns}
        out.append(reduce(metric, cols))
    return np.concatenate(out)


def _pooled(reps: list[dict[str, np.ndarray]], metric: Metric) -> float:
    return float(reduce(metric, {c: np.concatenate([r[c] for r in reps]) for c in metric.columns}))


def _known(rep: dict[str, np.ndarray], metric: Metric) -> dict[str, np.ndarray]:
    """The metric's columns without the requests that lack a value for it."""
    keep = ~np.any([np.isnan(rep[c]) for c in metric.columns], axis=0)
    return {c: rep[c][keep] for c in metric.columns}


def _side(group: Group, metric: Metric, resamples: int, rng: np.random.Generator
          ) -> tuple[float | None, np.ndarray | None, int]:
    """(point value, resampled values or None, sample count) of one side."""
    if metric.per_request:
        reps = [_known(r, metric) for r in group.requests]
        reps = [r for r in reps if len(r[metric.columns[0]])]
        count = sum(len(r[metric.columns[0]]) for r in reps)
        if not count:
            return None, None, 0
        value = _pooled(reps, metric)
        return value, _requests_resampled(reps, metric, resamples, rng), count
    values = np.asarray([row.get(metric.name) for row in group.rows], dtype=float)
    values = values[~np.isnan(values)]
    if not values.size:
        return None, None, 0
    if metric.better == ZERO:  # a count that must stay 0: the total, no interval
        return float(values.sum()), None, int(values.size)
    boot = values[rng.integers(0, values.size, (resamples, values.size))].mean(axis=1)
    return float(values.mean()), boot, int(values.size)


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float] | None:
    """The two-sided percentile interval at ``level`` of the finite ``values``."""
    values = values[np.isfinite(values)]
    if not values.size:
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def estimate(metric: Metric, base: Group, new: Group, *, level: float, resamples: int,
             seed: int) -> Estimate:
    """Base, new, change and its percentile interval at ``level``."""
    rng = np.random.default_rng(seed)
    b_value, b_boot, n_base = _side(base, metric, resamples, rng)
    n_value, n_boot, n_new = _side(new, metric, resamples, rng)
    if b_boot is None or n_boot is None or b_value is None or n_value is None:
        return Estimate(b_value, n_value, None, None, None, n_base, n_new)
    point = float(change(metric, b_value, n_value))
    bounds = _percentiles(change(metric, b_boot, n_boot), level)
    if not np.isfinite(point) or bounds is None:
        return Estimate(b_value, n_value, None, None, None, n_base, n_new)
    return Estimate(b_value, n_value, point, *bounds, n_base, n_new)


def interval(metric: Metric, group: Group, *, level: float, resamples: int, seed: int
             ) -> tuple[float | None, float | None, float | None]:
    """One side's value and the percentile interval at ``level`` of its own resamples (as
    :func:`estimate` resamples it); ``None`` where there is no value or no interval."""
    value, boot, _ = _side(group, metric, resamples, np.random.default_rng(seed))
    bounds = None if value is None or boot is None else _percentiles(boot, level)
    return (value, None, None) if bounds is None else (value, *bounds)
