"""A capacity from all of a search's probes: SLO attainment against load as a curve, and the
load where it crosses the target, with an interval.

The probe is the unit. Under queueing a probe's misses come in runs (one slow request delays
the next), so its requests are not independent: on a simulated queue the variance of a
probe's attainment was 3 to 9 times the binomial one at capacity, and the earlier search,
which decided each load by a Wilson interval of its pooled requests, covered the true
capacity in 42% to 71% of searches.

The model is a logistic regression of attainment on log rate, fitted by statsmodels as a
quasi-binomial GLM to all probes, then to those within a factor ``WINDOW`` of that estimate
(loads far from the capacity would bend the curve): the between-probe overdispersion
(Pearson chi-square over the residual degrees of freedom, at least 1) widens the
covariance. The capacity is the rate where the
fitted curve meets the target, its interval Fieller's (the ratio of two estimates, as for a
dose that kills 50%) with Student's t on the residual degrees of freedom. The interval is
unbounded (None) where the slope is not told from flat. Where the probes separate (every
probe below some load all good, above it all missed or mixed: a knee too steep for the
curve), the estimate is the middle of the bracket between the last load that looks met and
the first that looks missed, and the interval's ends are loads that met or missed the target
with confidence on their own (Wilson, their probes pooled).

The curve is an approximation (a queue's attainment is not exactly logistic in log load) and
the search places its probes from what it has seen. ``LEVEL`` is therefore nominally 99%: on
simulated queues of four kinds the 95% Fieller interval covered in 89% to 91% of searches and
the 99% one in 96% to 98% (``tests/benchmarks/capacity_coverage.py``, 400 searches each,
figures in docs/capacity.md).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import statsmodels.api as sm
from scipy.stats import t as student_t
from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

from bench.stats import wilson_interval

#: The nominal level of the capacity interval (see the module docstring).
LEVEL = 0.99
#: The second fit uses the probes within this factor of the first one's estimate.
WINDOW = 1.5


@dataclass(frozen=True)
class Fit:
    """The fitted curve's crossing of the target: ``estimate`` and ``[low, high]`` in
    requests/s (an end None where unbounded), the overdispersion and the probes used;
    ``why`` says why there is no estimate or interval ('' when there is both)."""

    estimate: float | None
    low: float | None
    high: float | None
    dispersion: float | None
    probes: int
    why: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _fieller(a: float, b: float, cov: np.ndarray, at: float, t: float
             ) -> tuple[float, float] | None:
    """Fieller's interval for ``x`` where ``a + b x = at``; None where it is unbounded."""
    qa = b * b - t * t * cov[1, 1]
    qb = 2 * (b * (a - at) - t * t * cov[0, 1])
    qc = (a - at) ** 2 - t * t * cov[0, 0]
    disc = qb * qb - 4 * qa * qc
    if qa <= 0 or disc < 0:
        return None
    root = math.sqrt(disc)
    return (-qb - root) / (2 * qa), (-qb + root) / (2 * qa)


def _bracket(rates: np.ndarray, sent: np.ndarray, good: np.ndarray, target: float,
             level: float) -> Fit:
    """Where the probes separate: the estimate is the middle of the bracket between the
    highest load that looks like it meets the target (its probes pooled) and the lowest higher
    one that does not; the interval's ends are the highest load below that met it and the
    lowest load above that missed it with confidence (a Wilson interval of its pooled
    requests: with no miss near the knee there is no overdispersion to widen it)."""
    pooled = {r: (good[rates == r].sum(), sent[rates == r].sum()) for r in set(rates)}
    looks_missed = [r for r, (g, n) in pooled.items() if g < target * n]
    edge = min(looks_missed, default=None)
    looks_met = [r for r, (g, n) in pooled.items() if g >= target * n and r < (edge or np.inf)]
    middle = (math.sqrt(max(looks_met) * edge) if looks_met and edge is not None else None)
    met = [r for r, (g, n) in pooled.items() if wilson_interval(g, n, level)[0] >= target]
    low = max((r for r in met if middle is None or r <= middle), default=None)
    missed = [r for r, (g, n) in pooled.items() if wilson_interval(g, n, level)[1] < target]
    high = min((r for r in missed if middle is None or r >= middle), default=None)
    return Fit(middle, low, high, None, len(rates),
               "the probes separate: the interval is between loads decided on their own")


def _within(probes: Sequence[tuple[float, int, int]], centre: float | None,
            window: float | None) -> list[tuple[float, int, int]] | None:
    """The probes within a factor ``window`` of ``centre``; None where that leaves them all,
    or fewer than 3 at 2 loads, or there is no centre or window."""
    if window is None or centre is None:
        return None
    near = [p for p in probes if abs(math.log(p[0] / centre)) <= math.log(window)]
    if len(near) == len(probes) or len(near) < 3 or len({p[0] for p in near}) < 2:
        return None
    return near


def fit_capacity(probes: Sequence[tuple[float, int, int]], target: float,
                 level: float = LEVEL, window: float | None = WINDOW) -> Fit:
    """The capacity where attainment crosses ``target``, from ``(rate, sent, good)`` probes:
    fitted to all of them, then again to those within a factor ``window`` of that estimate
    (where at least 3 probes at 2 loads are)."""
    fit = _fit(probes, target, level)
    near = _within(probes, fit.estimate, window) if fit.dispersion is not None else None
    return fit if near is None else _fit(near, target, level)


def _glm(rates: np.ndarray, sent: np.ndarray, good: np.ndarray, *columns: np.ndarray):
    """The binomial GLM of attainment on a constant, log rate and ``columns``, and its
    overdispersion (at least 1); None where the probes separate."""
    x = np.column_stack([np.ones_like(rates), np.log(rates), *columns])
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = sm.GLM(np.column_stack([good, sent - good]), x,
                            family=sm.families.Binomial()).fit()
        except (PerfectSeparationWarning, ValueError, np.linalg.LinAlgError):
            return None
    mu = np.clip(result.fittedvalues, 1e-9, 1 - 1e-9)
    pearson = float(np.sum((good - sent * mu) ** 2 / (sent * mu * (1 - mu))))
    residual = len(rates) - x.shape[1]
    return result, max(1.0, pearson / residual) if residual > 0 else 1.0


def _columns(probes: Sequence[tuple[float, ...]]) -> tuple[np.ndarray, ...]:
    return tuple(np.array([p[i] for p in probes], dtype=float) for i in range(len(probes[0])))


def _fit(probes: Sequence[tuple[float, int, int]], target: float, level: float) -> Fit:
    k = len(probes)
    if k < 3 or len({p[0] for p in probes}) < 2 or not all(p[1] for p in probes):
        return Fit(None, None, None, None, k, "fewer than 3 probes at 2 loads")
    rates, sent, good = _columns(probes)
    fitted = _glm(rates, sent, good)
    if fitted is None:
        return _bracket(rates, sent, good, target, level)
    result, dispersion = fitted
    a, b = (float(v) for v in result.params)
    if b >= 0:
        return Fit(None, None, None, dispersion, k, "attainment does not fall with load")
    at = math.log(target / (1 - target))
    estimate = math.exp((at - a) / b)
    t = float(student_t.ppf(0.5 + level / 2, k - 2))
    ends = _fieller(a, b, np.asarray(result.cov_params()) * dispersion, at, t)
    if ends is None:
        return Fit(estimate, None, None, dispersion, k, "the slope is not told from flat")
    low, high = (math.exp(e) if abs(e) < 700 else None for e in ends)  # beyond: unbounded
    return Fit(estimate, low or None, high, dispersion, k)


@dataclass(frozen=True)
class Cost:
    """What salting costs in capacity, ``1 - salted / unsalted``: the estimate and
    ``[low, high]`` (an end None where unbounded); ``why`` says why one is missing."""

    point: float | None
    low: float | None
    high: float | None
    dispersion: float | None
    why: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def fit_cost(none: Sequence[tuple[float, int, int]], salted: Sequence[tuple[float, int, int]],
             target: float, level: float = LEVEL, window: float | None = WINDOW) -> Cost:
    """The cost of salting from both salt modes' probes at once, as a parallel-line assay
    (the relative potency of a bioassay): one curve with a common slope ``b`` and a shift
    ``d`` for salted probes, so that ``log(salted / unsalted capacity) = -d / b``, with
    Fieller's interval. Each mode's probes within a factor ``window`` of its own capacity."""
    def near(probes: Sequence[tuple[float, int, int]]) -> Sequence[tuple[float, int, int]]:
        return _within(probes, fit_capacity(probes, target, level, window).estimate,
                       window) or probes

    if min(len(none), len(salted)) < 3:
        return Cost(None, None, None, None, "fewer than 3 probes of a salt mode")
    rows = [(*p, 0.0) for p in near(none)] + [(*p, 1.0) for p in near(salted)]
    rates, sent, good, is_salted = _columns(rows)
    fitted = _glm(rates, sent, good, is_salted)
    if fitted is None:
        return Cost(None, None, None, None, "the probes separate")
    result, dispersion = fitted
    _, b, d = (float(v) for v in result.params)
    if b >= 0:
        return Cost(None, None, None, dispersion, "attainment does not fall with load")
    cov = np.asarray(result.cov_params())[np.ix_([2, 1], [2, 1])] * dispersion
    t = float(student_t.ppf(0.5 + level / 2, len(rows) - 3))
    ends = _fieller(d, b, cov, 0.0, t)
    point = 1 - math.exp(-d / b)
    if ends is None:
        return Cost(point, None, None, dispersion, "the slope is not told from flat")
    return Cost(point, 1 - math.exp(min(ends[1], 700)), 1 - math.exp(max(ends[0], -700)),
                dispersion)
