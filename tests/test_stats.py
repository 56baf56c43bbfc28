"""Side-channel statistics: AUC, one-sided Mann-Whitney test, Holm, power (no engine)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, norm

from bench.stats import (
    auc,
    auc_interval,
    holm,
    min_detectable_auc,
    mwu_pvalue,
    samples_for_power,
    side_channel_tests,
)


def untied(n_a: int, n_b: int, u: int) -> tuple[list[float], list[float]]:
    """Untied samples with U = u: from complete separation, swap an adjacent
    (fast, slow) pair of the pooled order once per lost pair."""
    order = ["f"] * n_b + ["s"] * n_a
    for _ in range(n_a * n_b - u):
        i = "".join(order).index("fs")
        order[i], order[i + 1] = "s", "f"
    slow = [float(i) for i, label in enumerate(order) if label == "s"]
    fast = [float(i) for i, label in enumerate(order) if label == "f"]
    return slow, fast


def power(n: int, target_auc: float, alpha: float, seed: int, simulations: int = 400) -> float:
    """Independent check: share of normal draws with AUC target_auc rejected at alpha."""
    rng = np.random.default_rng(seed)
    shift = np.sqrt(2) * norm.ppf(target_auc)
    slow = rng.normal(shift, 1, (simulations, n))
    fast = rng.normal(0, 1, (simulations, n))
    p = mannwhitneyu(slow, fast, axis=1, alternative="greater", method="exact").pvalue
    return float(np.mean(p <= alpha))


def test_auc_hand_cases() -> None:
    assert auc([4, 5, 6], [1, 2, 3]) == 1.0
    assert auc([1, 2, 3], [4, 5, 6]) == 0.0
    assert auc([2, 2], [2, 2, 2]) == 0.5
    # Pairs: 1<2, 1<3, 2=2 (1/2), 2<3, 4>2, 4>3 -> 2.5 / 6.
    assert auc([1, 2, 4], [2, 3]) == pytest.approx(5 / 12)


def test_auc_interval() -> None:
    assert auc_interval([4, 5, 6], [1, 2, 3]) == (1.0, 1.0)
    slow, fast = [1.0, 2.5, 3.1, 4.0, 5.2], [1.5, 2.0, 0.3, 7.0]
    low, high = auc_interval(slow, fast, seed=3)
    assert 0.0 <= low < auc(slow, fast) < high <= 1.0
    assert auc_interval(slow, fast, seed=3) == (low, high)
    narrow = auc_interval(slow, fast, seed=3, level=0.5)
    assert low <= narrow[0] and narrow[1] <= high


def test_mwu_pvalue_exact_hand_cases() -> None:
    # 3 vs 3: C(6, 3) = 20 equally likely splits; U = 9 in one, U = 8 in one.
    assert mwu_pvalue([4, 5, 6], [1, 2, 3]) == pytest.approx(1 / 20)
    assert mwu_pvalue([3, 5, 6], [1, 2, 4]) == pytest.approx(2 / 20)
    assert mwu_pvalue([1, 2, 3], [4, 5, 6]) == pytest.approx(1.0)


def test_mwu_pvalue_ties_use_permutations() -> None:
    # All tied: no evidence at all (the untied exact distribution would say 0.65).
    assert mwu_pvalue([1, 1, 1], [1, 1, 1]) == pytest.approx(1.0)
    # Tied within groups only: the observed split is the most extreme of 20.
    assert mwu_pvalue([2, 2, 2], [1, 1, 1]) == pytest.approx(1 / 20)
    rng = np.random.default_rng(7)
    slow, fast = rng.integers(3, 9, 30), rng.integers(0, 6, 30)  # too many splits to enumerate
    p = mwu_pvalue(slow, fast)
    assert 0.0 < p <= 1.0 and p < 0.01
    assert mwu_pvalue(slow, fast) == p  # seeded
    assert 0.0 < mwu_pvalue(fast, slow) <= 1.0 and mwu_pvalue(fast, slow) > 0.99


def test_holm() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    out = holm([0.01, None, 0.04, None, 0.03])
    assert out[1] is None and out[3] is None
    assert [out[0], out[2], out[4]] == pytest.approx([0.03, 0.06, 0.06])  # m = 3, not 5
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # capped
    assert holm([]) == [] and holm([None]) == [None]
    raw = [0.001, 0.2, 0.012, 0.013, 0.04, 0.5]
    adjusted = holm(raw)
    order = np.argsort(raw)
    assert all(np.diff(np.asarray(adjusted)[order]) >= 0)  # monotone in raw order
    assert all(a >= p for a, p in zip(adjusted, raw))


def test_min_detectable_auc() -> None:
    assert min_detectable_auc(3, 3, 0.05) == 1.0
    assert min_detectable_auc(3, 3, 0.01) is None
    assert min_detectable_auc(2, 2, 0.01) is None
    at_10 = min_detectable_auc(10, 10, 0.05)
    at_20 = min_detectable_auc(20, 20, 0.05)
    assert at_10 is not None and at_20 is not None and 0.5 < at_20 < at_10 < 1.0
    assert min_detectable_auc(10, 10, 0.05 / 18) > at_10
    for n_a, n_b, alpha in [(10, 10, 0.05), (7, 12, 0.01), (20, 20, 0.05 / 18)]:
        u = round(min_detectable_auc(n_a, n_b, alpha) * n_a * n_b)
        assert auc(*untied(n_a, n_b, u - 1)) == (u - 1) / (n_a * n_b)
        assert mwu_pvalue(*untied(n_a, n_b, u)) <= alpha
        assert mwu_pvalue(*untied(n_a, n_b, u - 1)) > alpha


def test_samples_for_power() -> None:
    for tests in (1, 18):
        n = samples_for_power(0.8, 0.8, 0.05, tests=tests)
        alpha = 0.05 / tests
        assert power(n, 0.8, alpha, seed=12345) >= 0.75
        assert power(n // 2, 0.8, alpha, seed=12345) < 0.8
    assert samples_for_power(tests=18) > samples_for_power(tests=1)
    assert samples_for_power(0.9) < samples_for_power(0.8)
    with pytest.raises(ValueError):
        samples_for_power(0.5)


def test_side_channel_tests() -> None:
    rng = np.random.default_rng(1)
    separated = (list(rng.normal(10, 1, 12)), list(rng.normal(0, 1, 12)))
    null = (list(rng.normal(0, 1, 12)), list(rng.normal(0, 1, 12)))
    short = ([5.0], [1.0, 2.0, 3.0])
    sep, nul, few = side_channel_tests([separated, null, short])
    assert sep.finding == "distinguishable" and sep.auc == 1.0
    assert sep.ci_low is not None and sep.ci_low <= sep.auc <= sep.ci_high
    assert nul.finding == "no evidence" and nul.p_adjusted > 0.05
    assert few.finding == "too few samples"
    assert (few.auc, few.ci_low, few.ci_high, few.p_value, few.p_adjusted,
            few.min_detectable_auc) == (None,) * 6
    # m = 2: the short row does not count.
    assert sep.p_adjusted == pytest.approx(2 * sep.p_value)
    assert sep.min_detectable_auc == min_detectable_auc(12, 12, 0.05 / 2)

    alone = side_channel_tests([separated, short])[0]
    assert alone.p_adjusted == alone.p_value
    assert alone.min_detectable_auc == min_detectable_auc(12, 12, 0.05)
    # Holm raises p-values as rows are added.
    more = side_channel_tests([separated] + [null] * 17)[0]
    assert alone.p_adjusted < sep.p_adjusted < more.p_adjusted
    assert more.min_detectable_auc > alone.min_detectable_auc

    # A modest effect that passes alone but not among 18 rows.
    modest = ([3.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 4.0, 4.5, 0.0])
    assert side_channel_tests([modest])[0].finding == "distinguishable"
    assert side_channel_tests([modest] + [null] * 17)[0].finding == "no evidence"
