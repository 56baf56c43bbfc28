"""Statistics for the timing side channel: effect size, one-sided test, multiplicity, power.

Each (path, modality) row has two small TTFT samples: ``slow`` (media never seen) and
``fast`` (media another tenant already sent). The effect size is the AUC, P(slow > fast);
the evidence is a one-sided Mann-Whitney test, Holm-adjusted across the rows of a run.
A percentile bootstrap interval is reported for the AUC as a description only; the test
decides. A row without evidence is reported
as "no evidence", never "indistinguishable", next to the smallest AUC its sample sizes
could have detected at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import bootstrap, mannwhitneyu, norm, permutation_test, rankdata

# The exact null distribution of U costs little up to about 100 x 100 pairs, then grows fast.
_EXACT_MAX_PAIRS = 10_000
_PERMUTATIONS = 19_999
_PERMUTATION_SEED = 0
#: A row's finding.
DISTINGUISHABLE, NO_EVIDENCE, TOO_FEW_SAMPLES = "distinguishable", "no evidence", "too few samples"


def _auc_along(slow: np.ndarray, fast: np.ndarray, axis: int = -1) -> np.ndarray:
    """Vectorized AUC: Mann-Whitney U of ``slow`` over ``n_a * n_b``."""
    u = mannwhitneyu(slow, fast, axis=axis, method="asymptotic").statistic
    return u / (slow.shape[axis] * fast.shape[axis])


def auc(slow: Sequence[float], fast: Sequence[float]) -> float:
    """P(a draw from ``slow`` > a draw from ``fast``), ties counting one half."""
    return float(_auc_along(np.asarray(slow, float), np.asarray(fast, float)))


def auc_interval(slow: Sequence[float], fast: Sequence[float], *, level: float = 0.95,
                 resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`auc`, both samples resampled independently."""
    result = bootstrap((np.asarray(slow, float), np.asarray(fast, float)), _auc_along,
                       n_resamples=resamples, vectorized=True, paired=False, axis=-1,
                       confidence_level=level, method="percentile",
                       rng=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _rank_sum(slow_ranks: np.ndarray, fast_ranks: np.ndarray, axis: int) -> np.ndarray:
    """Wilcoxon rank sum of the first sample (U plus a constant)."""
    return np.sum(slow_ranks, axis=axis)


def mwu_pvalue(slow: Sequence[float], fast: Sequence[float]) -> float:
    """One-sided Mann-Whitney p-value for H1: ``slow`` tends to be larger than ``fast``.

    Without ties and with at most 10,000 pairs: the exact null distribution of U.
    Otherwise: a permutation test of the rank sum over the pooled midranks (exact
    enumeration when there are at most 19,999 splits, else 19,999 random ones with a
    fixed seed), which stays valid for small samples with ties where both the exact
    (untied) distribution and the normal approximation are wrong.
    """
    a, b = np.asarray(slow, float), np.asarray(fast, float)
    pooled = np.concatenate([a, b])
    if np.unique(pooled).size == pooled.size and a.size * b.size <= _EXACT_MAX_PAIRS:
        return float(mannwhitneyu(a, b, alternative="greater", method="exact").pvalue)
    ranks = rankdata(pooled)
    result = permutation_test((ranks[:a.size], ranks[a.size:]), _rank_sum,
                              permutation_type="independent", vectorized=True,
                              n_resamples=_PERMUTATIONS, alternative="greater",
                              rng=np.random.default_rng(_PERMUTATION_SEED))
    return float(result.pvalue)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values; ``None`` entries stay ``None`` and do not count."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (len(present) - rank) * p))
        adjusted[i] = running
    return adjusted


def min_detectable_auc(n_a: int, n_b: int, alpha: float) -> float | None:
    """Smallest AUC whose exact one-sided p-value (no ties) is <= ``alpha`` at these sizes.

    ``None`` when even complete separation (AUC 1.0) cannot reach ``alpha``.
    """
    pairs = n_a * n_b
    u = np.arange(pairs + 1)
    # One untied sample pair per U: fast is 0..n_b-1 and slow value i beats beats[u, i] of them.
    beats = np.clip(u[:, None] - n_b * np.arange(n_a), 0, n_b)
    slow = beats - 1 + (np.arange(n_a) + 1) / (n_a + 1)
    p = mannwhitneyu(slow, np.arange(n_b)[None, :], axis=1, alternative="greater",
                     method="exact").pvalue
    reached = np.flatnonzero(p <= alpha)
    return float(reached[0] / pairs) if reached.size else None


def _simulated_power(n: int, shift: float, alpha: float, seed: int, simulations: int) -> float:
    """Share of seeded draws (slow ~ N(shift, 1), fast ~ N(0, 1), n each) with p <= alpha.

    Exact test up to 10,000 pairs; beyond, where it gets slow, the normal approximation.
    """
    rng = np.random.default_rng(seed)
    slow = rng.normal(shift, 1.0, (simulations, n))
    fast = rng.normal(0.0, 1.0, (simulations, n))
    method = "exact" if n * n <= _EXACT_MAX_PAIRS else "asymptotic"
    p = mannwhitneyu(slow, fast, axis=1, alternative="greater", method=method).pvalue
    return float(np.mean(p <= alpha))


def samples_for_power(target_auc: float = 0.8, power: float = 0.8, alpha: float = 0.05,
                      tests: int = 1, *, seed: int = 0, simulations: int = 400) -> int:
    """Per-group sample size at which the one-sided test at ``alpha / tests`` (Holm's worst
    case) detects a true AUC of ``target_auc`` with at least ``power``.

    Starts from Noether's approximation and steps n by one until the seeded simulation
    (normal samples shifted so that P(slow > fast) = ``target_auc``) just reaches ``power``.
    """
    if not 0.5 < target_auc < 1.0:
        raise ValueError(f"target_auc must be in (0.5, 1), got {target_auc}")
    level = alpha / tests
    z = norm.ppf(1 - level) + norm.ppf(power)
    n = max(2, math.ceil(z ** 2 / (3 * (target_auc - 0.5) ** 2) / 2))
    shift = math.sqrt(2) * norm.ppf(target_auc)

    def reached(k: int) -> bool:
        return _simulated_power(k, shift, level, seed, simulations) >= power

    if reached(n):
        while n > 2 and reached(n - 1):
            n -= 1
        return n
    n += 1
    while not reached(n):
        n += 1
    return n


@dataclass(frozen=True)
class SideChannelTest:
    """Result for one (slow, fast) row of a run."""

    auc: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None
    min_detectable_auc: float | None
    finding: str  # DISTINGUISHABLE | NO_EVIDENCE | TOO_FEW_SAMPLES


def side_channel_tests(rows: Sequence[tuple[Sequence[float], Sequence[float]]],
                       alpha: float = 0.05) -> list[SideChannelTest]:
    """Test every (slow, fast) row of one run, Holm-adjusted across the rows with a p-value.

    A row with fewer than 2 values in either group gets no numbers and does not count in
    the adjustment. ``min_detectable_auc`` is taken at ``alpha / m`` (Holm's worst case).
    """
    usable = [len(slow) >= 2 and len(fast) >= 2 for slow, fast in rows]
    pvalues = [mwu_pvalue(slow, fast) if ok else None for (slow, fast), ok in zip(rows, usable)]
    adjusted = holm(pvalues)
    tests = sum(usable)
    results = []
    for (slow, fast), p, q in zip(rows, pvalues, adjusted):
        if p is None or q is None:
            results.append(SideChannelTest(None, None, None, None, None, None, TOO_FEW_SAMPLES))
            continue
        low, high = auc_interval(slow, fast)
        results.append(SideChannelTest(
            auc(slow, fast), low, high, p, q,
            min_detectable_auc(len(slow), len(fast), alpha / tests),
            DISTINGUISHABLE if q <= alpha else NO_EVIDENCE))
    return results
