"""Statistics for the timing side channel: effect size, one-sided paired test, multiplicity,
power.

Each (path, modality) row holds TTFT pairs, sent one after the other (in random order
within a pair): ``slow`` (e.g. media never seen) and ``fast`` (media another tenant already
sent). Everything works on the pair differences d = slow - fast. The evidence is a
one-sided Wilcoxon signed-rank test; the effect size that goes with it is the paired AUC
T+ / (T+ + T-), the signed-rank sum's share on the "slow is slower" side (0.5: no
difference; 1.0: slower in every pair; for normal differences it estimates
P(d1 + d2 > 0) of two independent pairs). Holm's adjustment runs across the rows of the
tested family only (the cross-tenant rows); positive controls are tested alone.
A percentile bootstrap interval (pairs resampled) describes the effect; the test decides.
A row without evidence is reported as "no evidence", never "indistinguishable", next to
the smallest paired AUC its pair count could have detected at all.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, bootstrap, norm, rankdata, wilcoxon

_PERMUTATIONS = 19_999
_PERMUTATION_SEED = 0
#: The exact null distribution of the signed-rank sum is cheap up to this many pairs.
_EXACT_MAX_PAIRS = 200
#: A row's finding.
DISTINGUISHABLE, NO_EVIDENCE, TOO_FEW_SAMPLES = "distinguishable", "no evidence", "too few samples"
#: The side channel's power target: detect a true paired AUC of 0.8 with 80% power at
#: alpha 0.05, Holm-adjusted across a run's cross-tenant rows. A row without evidence
#: whose smallest detectable AUC is above the target is underpowered.
POWER_TARGET = {"target_auc": 0.8, "power": 0.8, "alpha": 0.05}
#: Probes (pairs) per guess for which :func:`guess_accuracy` reports the accuracy.
GUESS_PROBES = (1, 3, 5, 9)


def _differences(slow: Sequence[float], fast: Sequence[float]) -> np.ndarray:
    a, b = np.asarray(slow, float), np.asarray(fast, float)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {a.size} and {b.size}")
    return a - b


def _paired_auc_along(d: np.ndarray, axis: int = -1) -> np.ndarray:
    """Vectorized paired AUC of differences ``d``: the rank sum (ranks of ``|d|``) of the
    positive differences over the total, zero differences counting one half."""
    ranks = rankdata(np.abs(d), axis=axis)
    positive = np.sum(np.where(d > 0, ranks, 0.0) + np.where(d == 0, ranks / 2, 0.0), axis=axis)
    n = d.shape[axis]
    return positive / (n * (n + 1) / 2)


def paired_auc(slow: Sequence[float], fast: Sequence[float]) -> float:
    """T+ / (T+ + T-) of the pair differences ``slow - fast`` (zero differences split)."""
    return float(_paired_auc_along(_differences(slow, fast)))


def paired_auc_interval(slow: Sequence[float], fast: Sequence[float], *, level: float = 0.95,
                        resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`paired_auc`, the pairs resampled."""
    result = bootstrap((_differences(slow, fast),), _paired_auc_along, n_resamples=resamples,
                       vectorized=True, axis=-1, confidence_level=level, method="percentile",
                       rng=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


@functools.lru_cache(maxsize=64)
def signed_rank_tail(n: int) -> np.ndarray:
    """P(T+ >= t) for t = 0 .. n(n+1)/2 under the null: n untied pairs, each sign a fair coin
    (read-only, cached)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):  # subsets of the ranks 1..n by their sum
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    tail = np.cumsum(counts[::-1])[::-1] / 2.0 ** n
    tail.flags.writeable = False
    return tail


def _sign_flip_pvalue(signed: np.ndarray) -> float:
    """P(sum of the signed ranks >= the observed one) under sign flips: all 2^n when there
    are at most 19,999 + 1, else the observed signs and 19,999 random flips (fixed seed)."""
    n = signed.size
    if 2 ** n <= _PERMUTATIONS + 1:
        flips = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)
        return float(np.mean(flips @ signed >= signed.sum()))
    rng = np.random.default_rng(_PERMUTATION_SEED)
    null = rng.choice([-1.0, 1.0], (_PERMUTATIONS, n)) @ signed
    return float((1 + np.sum(null >= signed.sum())) / (_PERMUTATIONS + 1))


def signed_rank_pvalue(slow: Sequence[float], fast: Sequence[float]) -> float:
    """One-sided Wilcoxon signed-rank p-value for H1: ``slow`` tends to exceed its pair in
    ``fast``.

    Without zero or tied ``|d|`` (and at most 200 pairs): the exact null distribution.
    Otherwise: a sign-flip permutation test of the signed midranks (a zero difference
    keeps its rank with sign 0), valid for small samples with ties where the exact untied
    distribution and the normal approximation are not.
    """
    d = _differences(slow, fast)
    magnitude = np.abs(d)
    ranks = rankdata(magnitude)
    if np.all(magnitude > 0) and np.unique(magnitude).size == d.size <= _EXACT_MAX_PAIRS:
        return float(signed_rank_tail(d.size)[round(ranks[d > 0].sum())])
    return _sign_flip_pvalue(np.sign(d) * ranks)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values; ``None`` entries stay ``None`` and do not count."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (len(present) - rank) * p))
        adjusted[i] = running
    return adjusted


def min_detectable_paired_auc(n: int, alpha: float) -> float | None:
    """Smallest paired AUC whose exact one-sided p-value (untied) is <= ``alpha`` with ``n``
    pairs; ``None`` when even slower-in-every-pair (1.0, p = 2^-n) cannot reach ``alpha``."""
    reached = np.flatnonzero(signed_rank_tail(n) <= alpha)
    return float(reached[0] / (n * (n + 1) / 2)) if reached.size else None


def paired_shift(target_auc: float) -> float:
    """Mean of normal pair differences (SD 1) whose paired AUC is ``target_auc``:
    P(d1 + d2 > 0) = Phi(sqrt(2) * shift)."""
    return float(norm.ppf(target_auc) / math.sqrt(2))


def _simulated_power(n: int, shift: float, alpha: float, seed: int, simulations: int) -> float:
    """Share of seeded draws (n pair differences ~ N(shift, 1)) with exact p <= alpha."""
    d = np.random.default_rng(seed).normal(shift, 1.0, (simulations, n))
    p = wilcoxon(d, axis=1, alternative="greater", method="exact").pvalue
    return float(np.mean(p <= alpha))


def samples_for_power(target_auc: float = 0.8, power: float = 0.8, alpha: float = 0.05,
                      tests: int = 1, *, seed: int = 0, simulations: int = 400) -> int:
    """Pairs at which the one-sided signed-rank test at ``alpha / tests`` (Holm's worst
    case) detects a true paired AUC of ``target_auc`` with at least ``power``.

    Starts from Noether's approximation for the signed-rank test and steps n by one until
    the seeded simulation (normal differences, :func:`paired_shift`) just reaches ``power``.
    """
    if not 0.5 < target_auc < 1.0:
        raise ValueError(f"target_auc must be in (0.5, 1), got {target_auc}")
    level = alpha / tests
    z = norm.ppf(1 - level) + norm.ppf(power)
    n = max(2, math.ceil(z ** 2 / (3 * (target_auc - 0.5) ** 2)))
    shift = paired_shift(target_auc)

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
    """Result for one (slow, fast) row of paired samples of a run."""

    auc: float | None  # paired AUC
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    #: Holm-adjusted within the family; a row outside it is tested alone (p itself).
    p_adjusted: float | None
    min_detectable_auc: float | None
    finding: str  # DISTINGUISHABLE | NO_EVIDENCE | TOO_FEW_SAMPLES
    in_family: bool


def side_channel_tests(rows: Sequence[tuple[Sequence[float], Sequence[float]]],
                       alpha: float = 0.05,
                       family: Sequence[bool] | None = None) -> list[SideChannelTest]:
    """Test every (slow, fast) row of one run (pairs: ``slow[i]`` with ``fast[i]``).

    The rows flagged in ``family`` (default: all) are Holm-adjusted together; the others
    (positive controls) are each tested alone at ``alpha``. A row with fewer than 2
    pairs gets no numbers and does not count in the adjustment. ``min_detectable_auc`` is
    taken at ``alpha / m`` (Holm's worst case) in the family, at ``alpha`` outside it.
    """
    family = [True] * len(rows) if family is None else list(family)
    if len(family) != len(rows):
        raise ValueError(f"{len(family)} family flags for {len(rows)} rows")
    pvalues = [signed_rank_pvalue(slow, fast) if len(slow) >= 2 else None
               for slow, fast in rows]
    adjusted = holm([p if tested else None for p, tested in zip(pvalues, family)])
    tests = sum(p is not None for p, tested in zip(pvalues, family) if tested)
    results = []
    for (slow, fast), p, q, tested in zip(rows, pvalues, adjusted, family):
        if p is None:
            results.append(SideChannelTest(None, None, None, None, None, None, TOO_FEW_SAMPLES,
                                           tested))
            continue
        q = q if tested else p
        low, high = paired_auc_interval(slow, fast)
        results.append(SideChannelTest(
            paired_auc(slow, fast), low, high, p, q,
            min_detectable_paired_auc(len(slow), alpha / tests if tested else alpha),
            DISTINGUISHABLE if q <= alpha else NO_EVIDENCE, tested))
    return results


def wilson_interval(successes: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n``."""
    z = float(norm.ppf(0.5 + level / 2))
    centre = (successes + z * z / 2) / (n + z * z)
    half = z * math.sqrt(successes * (n - successes) / n + z * z / 4) / (n + z * z)
    return max(0.0, centre - half), min(1.0, centre + half)


def majority_accuracy(p: float, k: int) -> float:
    """P(a majority of ``k`` independent guesses, each right with probability ``p``, is
    right), a tie settled by a coin."""
    right = binom.sf(k // 2, k, p)  # more than half right
    return float(right + (0.5 * binom.pmf(k // 2, k, p) if k % 2 == 0 else 0.0))


def guess_accuracy(slow: Sequence[float], fast: Sequence[float], level: float = 0.95,
                   probes: Sequence[int] = GUESS_PROBES, target: float = 0.95,
                   max_probes: int = 99) -> dict:
    """What an attacker gains: the accuracy of guessing which of two items another tenant
    sent (the slower one was not), from one probe pair and by a majority of ``k`` pairs.

    One pair is right with p = the share of pairs where ``slow`` is slower (ties: half),
    with a Wilson interval; ``k`` pairs, taken as independent, are right with
    :func:`majority_accuracy` (monotone in p, so the interval maps through it).
    ``probes_for_target``: the fewest pairs (odd, up to ``max_probes``) whose accuracy at
    the interval's lower end reaches ``target``; None if none does.
    """
    d = _differences(slow, fast)
    n = int(d.size)
    if n == 0:
        return {"pairs": 0, "p_pair": None, "accuracy": {}, "probes_for_target": None}
    wins = float(np.sum(d > 0) + 0.5 * np.sum(d == 0))
    low, high = wilson_interval(wins, n, level)
    acc = {k: [majority_accuracy(x, k) for x in (wins / n, low, high)] for k in probes}
    needed = next((k for k in range(1, max_probes + 1, 2)
                   if majority_accuracy(low, k) >= target), None)
    return {"pairs": n, "p_pair": wins / n, "level": level, "target": target,
            "accuracy": {str(k): v for k, v in acc.items()}, "probes_for_target": needed}
