"""Side-channel statistics: paired AUC, one-sided signed-rank test, Holm, power, and the whole
procedure simulated on data with known effects (no engine)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import norm, wilcoxon

from bench import stats
from bench.isolation.side_channel import SEEN, UNSEEN, probe_orders
from bench.stats import (
    holm,
    min_detectable_paired_auc,
    paired_auc,
    paired_auc_interval,
    paired_shift,
    samples_for_power,
    side_channel_tests,
    signed_rank_pvalue,
    signed_rank_tail,
)

#: A full run: 3 media paths x 3 media modalities, a cross-tenant row and a control each.
CELLS = 9


def with_positive_ranks(n: int, t: int) -> list[float]:
    """Untied differences (the ranks 1..n, signed) whose positive ranks sum to ``t``."""
    signs, left = {}, t
    for rank in range(n, 0, -1):
        signs[rank] = rank <= left
        left -= rank if signs[rank] else 0
    assert left == 0
    return [float(r if signs[r] else -r) for r in range(1, n + 1)]


def power(n: int, target_auc: float, alpha: float, seed: int, simulations: int = 2000) -> float:
    """Independent check: share of normal difference draws rejected at ``alpha``."""
    rng = np.random.default_rng(seed)
    d = rng.normal(norm.ppf(target_auc) / math.sqrt(2), 1, (simulations, n))
    return float(np.mean(wilcoxon(d, axis=1, alternative="greater").pvalue <= alpha))


def test_paired_auc_hand_cases() -> None:
    assert paired_auc([4, 5, 6], [1, 2, 3]) == 1.0
    assert paired_auc([1, 2, 3], [4, 5, 6]) == 0.0
    assert paired_auc([2, 2], [2, 2]) == 0.5
    # d = 1, -2, 3: T+ = 1 + 3 of 6.
    assert paired_auc([1, 0, 3], [0, 2, 0]) == pytest.approx(4 / 6)
    # d = 0, 1: the zero's rank 1 counts one half -> (0.5 + 2) / 3.
    assert paired_auc([1, 1], [1, 0]) == pytest.approx(2.5 / 3)
    # Pairing matters: every pair slower by 1 under a drift that swamps it.
    assert paired_auc([11, 21, 31, 41], [10, 20, 30, 40]) == 1.0
    with pytest.raises(ValueError, match="differ in length"):
        paired_auc([1, 2], [1])


def test_paired_auc_interval() -> None:
    assert paired_auc_interval([4, 5, 6], [1, 2, 3]) == (1.0, 1.0)
    slow, fast = [1.0, 2.5, 3.1, 4.0, 5.2, 0.1], [1.5, 2.0, 0.3, 7.0, 1.0, 0.0]
    low, high = paired_auc_interval(slow, fast, seed=3)
    assert 0.0 <= low < paired_auc(slow, fast) < high <= 1.0
    assert paired_auc_interval(slow, fast, seed=3) == (low, high)
    narrow = paired_auc_interval(slow, fast, seed=3, level=0.5)
    assert low <= narrow[0] and narrow[1] <= high


def test_signed_rank_pvalue_exact_hand_cases() -> None:
    # 3 pairs: 2^3 = 8 equally likely sign patterns; T+ = 6 in one, T+ >= 5 in two.
    assert signed_rank_pvalue([4, 5, 6], [1, 2, 3]) == pytest.approx(1 / 8)
    assert signed_rank_pvalue([0, 2, 3], [1, 0, 0]) == pytest.approx(2 / 8)  # d = -1, 2, 3
    assert signed_rank_pvalue([1, 2, 3], [4, 5, 6]) == pytest.approx(1.0)
    rng = np.random.default_rng(5)
    for n in (4, 9, 30):
        slow, fast = rng.normal(0.4, 1, n), rng.normal(0, 1, n)
        assert signed_rank_pvalue(slow, fast) == pytest.approx(
            wilcoxon(slow - fast, alternative="greater", method="exact").pvalue)


def test_signed_rank_pvalue_ties_and_zeros_use_sign_flips() -> None:
    assert signed_rank_pvalue([1, 1, 1], [1, 1, 1]) == pytest.approx(1.0)  # no evidence
    # |d| all tied: the observed signs are the most extreme of 8 flips.
    assert signed_rank_pvalue([2, 2, 2], [1, 1, 1]) == pytest.approx(1 / 8)
    # A zero keeps rank 1 and sign 0: d = 0, 1, 2 -> 2 of 4 flips of the others reach it.
    assert signed_rank_pvalue([1, 1, 2], [1, 0, 0]) == pytest.approx(1 / 4)
    rng = np.random.default_rng(7)
    slow, fast = rng.integers(3, 9, 40), rng.integers(0, 6, 40)  # too many flips to list
    p = signed_rank_pvalue(slow, fast)
    assert 0.0 < p < 0.01 and signed_rank_pvalue(slow, fast) == p  # seeded
    assert signed_rank_pvalue(fast, slow) > 0.99


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


def test_signed_rank_tail_is_the_exact_null() -> None:
    assert signed_rank_tail(2) == pytest.approx([1.0, 0.75, 0.5, 0.25])  # T+ in 0..3
    for n in (5, 12):
        tail = signed_rank_tail(n)
        for t in range(1, n * (n + 1) // 2 + 1):
            assert tail[t] == pytest.approx(signed_rank_pvalue(with_positive_ranks(n, t),
                                                               [0.0] * n))


def test_min_detectable_paired_auc() -> None:
    assert min_detectable_paired_auc(5, 0.05) == 1.0  # p = 1/32 only when every pair agrees
    assert min_detectable_paired_auc(4, 0.05) is None  # 1/16 > 0.05
    at_10, at_20 = min_detectable_paired_auc(10, 0.05), min_detectable_paired_auc(20, 0.05)
    assert at_10 is not None and at_20 is not None and 0.5 < at_20 < at_10 < 1.0
    assert min_detectable_paired_auc(20, 0.05 / CELLS) > at_20
    for n, alpha in [(10, 0.05), (12, 0.01), (37, 0.05 / CELLS)]:
        total = n * (n + 1) // 2
        t = round(min_detectable_paired_auc(n, alpha) * total)
        assert paired_auc(with_positive_ranks(n, t), [0.0] * n) == t / total
        assert signed_rank_pvalue(with_positive_ranks(n, t), [0.0] * n) <= alpha
        assert signed_rank_pvalue(with_positive_ranks(n, t - 1), [0.0] * n) > alpha


def test_paired_shift_gives_the_paired_auc() -> None:
    d = np.random.default_rng(3).normal(paired_shift(0.8), 1, 200_000)
    assert np.mean(d[::2] + d[1::2] > 0) == pytest.approx(0.8, abs=0.005)


def test_samples_for_power() -> None:
    for tests in (1, CELLS):
        n = samples_for_power(0.8, 0.8, 0.05, tests=tests)
        alpha = 0.05 / tests
        assert power(n, 0.8, alpha, seed=12345) >= 0.77
        assert power(n - 4, 0.8, alpha, seed=12345) < 0.8
    assert samples_for_power(tests=CELLS) == 37
    assert samples_for_power(tests=18) > samples_for_power(tests=CELLS) > samples_for_power()
    assert samples_for_power(0.9) < samples_for_power(0.8)
    with pytest.raises(ValueError):
        samples_for_power(0.5)


def test_side_channel_tests() -> None:
    rng = np.random.default_rng(1)
    separated = (list(rng.normal(10, 1, 12)), list(rng.normal(0, 1, 12)))
    null = (list(rng.normal(0, 1, 12)), list(rng.normal(0, 1, 12)))
    short = ([5.0], [1.0])
    sep, nul, few = side_channel_tests([separated, null, short])
    assert sep.finding == "distinguishable" and sep.auc == 1.0 and sep.in_family
    assert sep.ci_low is not None and sep.ci_low <= sep.auc <= sep.ci_high
    assert nul.finding == "no evidence" and nul.p_adjusted > 0.05
    assert few.finding == "too few samples"
    assert (few.auc, few.ci_low, few.ci_high, few.p_value, few.p_adjusted,
            few.min_detectable_auc) == (None,) * 6
    # m = 2: the short row does not count.
    assert sep.p_adjusted == pytest.approx(2 * sep.p_value)
    assert sep.min_detectable_auc == min_detectable_paired_auc(12, 0.05 / 2)
    alone = side_channel_tests([separated, short])[0]
    assert alone.p_adjusted == alone.p_value
    assert alone.min_detectable_auc == min_detectable_paired_auc(12, 0.05)
    more = side_channel_tests([separated] + [null] * 8)[0]
    assert alone.p_adjusted < sep.p_adjusted < more.p_adjusted
    with pytest.raises(ValueError, match="differ in length"):
        side_channel_tests([([1.0, 2.0, 3.0], [1.0, 2.0])])


def test_controls_stay_outside_the_holm_family() -> None:
    """Nine tested rows and nine controls: the tested rows are adjusted among themselves,
    each control alone."""
    rng = np.random.default_rng(2)
    tested = [(list(rng.normal(0.8, 1, 20)), list(rng.normal(0, 1, 20))) for _ in range(CELLS)]
    controls = [(list(rng.normal(0.3, 1, 20)), list(rng.normal(0, 1, 20)))
                for _ in range(CELLS)]
    out = side_channel_tests(tested + controls, 0.05, [True] * CELLS + [False] * CELLS)
    assert [t.p_adjusted for t in out[:CELLS]] == pytest.approx(holm([t.p_value
                                                                      for t in out[:CELLS]]))
    assert all(not t.in_family and t.p_adjusted == t.p_value for t in out[CELLS:])
    assert out[0].min_detectable_auc == min_detectable_paired_auc(20, 0.05 / CELLS)
    assert out[-1].min_detectable_auc == min_detectable_paired_auc(20, 0.05)
    with pytest.raises(ValueError, match="family flags"):
        side_channel_tests(tested, 0.05, [True])


def simulated_run(rng: np.random.Generator, pairs: int, shifts: list[float], *,
                  drift_sd: float = 2.0, order_effect: float = 0.0,
                  decimals: int | None = None) -> list[stats.SideChannelTest]:
    """The whole side-channel procedure on one simulated full run.

    Per cell and pair, both probes share a drift ~ N(0, ``drift_sd``) (the machine's state
    at that moment) and each adds N(0, 1) noise; the seen probe is faster by the cell's
    shift; the second probe of a pair is faster by ``order_effect``; the probes' order is
    drawn as :func:`probe_orders` draws it. The control's hit is faster by 3. TTFTs are
    rounded to ``decimals`` (ties) if given.
    """
    rows = []
    for shift in shifts:
        orders = probe_orders(pairs, random.Random(int(rng.integers(2**32))))
        second = np.array([order[1] for order in orders])
        drift = rng.normal(0, drift_sd, pairs)
        unseen = drift + rng.normal(0, 1, pairs) - order_effect * (second == UNSEEN)
        seen = drift + rng.normal(0, 1, pairs) - shift - order_effect * (second == SEEN)
        rows.append((unseen, seen))
    for _ in shifts:
        drift = rng.normal(0, drift_sd, pairs)
        rows.append((drift + rng.normal(0, 1, pairs) + 3, drift + rng.normal(0, 1, pairs)))
    if decimals is not None:
        rows = [(np.round(a, decimals), np.round(b, decimals)) for a, b in rows]
    flags = [True] * len(shifts) + [False] * len(shifts)
    return side_channel_tests([(list(a), list(b)) for a, b in rows], 0.05, flags)


def detections(runs: int, seed: int, pairs: int, shifts: list[float],
               **kw: float) -> tuple[float, np.ndarray]:
    """Over ``runs`` simulated runs: the share with any tested row distinguishable, and
    each tested row's detection rate."""
    rng = np.random.default_rng(seed)
    found = np.array([[t.finding == "distinguishable" for t in simulated_run(
        rng, pairs, shifts, **kw)[:len(shifts)]] for _ in range(runs)])
    return float(found.any(axis=1).mean()), found.mean(axis=0)


@pytest.fixture
def no_intervals(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bootstrap interval describes a row, it decides nothing: skipped for speed."""
    monkeypatch.setattr(stats, "paired_auc_interval", lambda slow, fast: (0.0, 1.0))


def test_simulated_procedure_false_alarms_and_power(no_intervals) -> None:
    pairs = samples_for_power(tests=CELLS)
    # No effect anywhere, the second probe of a pair faster: false alarms per run <= 5%
    # (the bound at 300 runs: 0.05 + 2 standard errors).
    any_null, _ = detections(300, 11, pairs, [0.0] * CELLS, order_effect=1.0)
    assert any_null <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 300)
    # One cell with a true paired AUC of 0.8 (differences of two N(0, 1) noises: SD sqrt 2)
    # among eight without: detected at about the design's 80%, under a drift that an
    # unpaired test could not see through; the others stay quiet.
    effect = math.sqrt(2) * paired_shift(0.8)
    _, rates = detections(300, 12, pairs, [effect] + [0.0] * (CELLS - 1))
    assert rates[0] >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / 300)
    assert rates[1:].max() <= 0.05


def test_simulated_procedure_with_ties(no_intervals) -> None:
    """TTFTs rounded so that ties and zero differences are common (the sign-flip path)."""
    any_null, _ = detections(40, 13, 12, [0.0] * CELLS, decimals=0)
    assert any_null <= 0.1
    _, rates = detections(40, 14, 12, [3.0] * CELLS, decimals=0)
    assert rates.min() >= 0.9
