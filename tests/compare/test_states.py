"""The four states of a metric: a regression needs an interval that excludes no change AND a
change beyond the threshold; "no significant change" needs an interval that rules out a
regression beyond the threshold; everything else is inconclusive, whatever the spread."""

from __future__ import annotations

import numpy as np
import pytest

from bench.compare.intervals import Estimate, estimate
from bench.compare.samples import Group
from bench.compare.thresholds import Settings
from bench.compare.unpaired import judge
from bench.registry import METRICS
from bench.vocab import IMPROVED, INCONCLUSIVE, NO_CHANGE, NOT_AVAILABLE, REGRESSED

S = Settings()
TTFT, TPUT, HIT, LEAK = (METRICS[n] for n in ("mean_ttft_ms", "request_throughput", "hit_rate",
                                               "leaked_tokens"))


def est(change: float, low: float, high: float, reps: int = 5) -> Estimate:
    return Estimate(10.0, 10.0 * (1 + change), change, low, high, reps, reps, 0.2, 0.2)


@pytest.mark.parametrize(("metric", "e", "threshold", "state"), [
    (TTFT, est(0.30, 0.20, 0.40), 0.10, REGRESSED),
    (TTFT, est(0.05, 0.02, 0.08), 0.10, NO_CHANGE),       # significant, ruled out beyond 10%
    (TTFT, est(0.05, -0.02, 0.08), 0.10, NO_CHANGE),      # the bad end within the threshold
    (TTFT, est(0.05, 0.02, 0.20), 0.10, INCONCLUSIVE),    # may be +20%: cannot tell
    (TTFT, est(0.30, -0.05, 0.60), 0.10, INCONCLUSIVE),   # beyond threshold, not significant
    (TTFT, est(-0.30, -0.40, -0.20), 0.10, IMPROVED),
    (TPUT, est(-0.30, -0.40, -0.20), 0.10, REGRESSED),    # higher is better
    (TPUT, est(0.30, 0.20, 0.40), 0.10, IMPROVED),
    (TPUT, est(-0.05, -0.30, 0.20), 0.10, INCONCLUSIVE),
    (TTFT, est(0.30, 0.20, 0.40), None, REGRESSED),       # not gated: significance only
    (TTFT, est(0.30, -0.05, 0.60), None, NO_CHANGE),
])
def test_states(metric, e: Estimate, threshold: float | None, state: str) -> None:
    assert judge(metric, e, threshold, S)[0] == state


def test_an_inconclusive_reason_says_how_far_and_how_many_starts() -> None:
    state, reason = judge(TTFT, est(0.05, -0.30, 0.60, reps=3), 0.40, S)
    assert state == INCONCLUSIVE
    assert "+60%" in reason and "3 vs 3 server starts" in reason
    k = int(reason.split("about ")[1].split(" runs (server starts) per side")[0])
    assert 3 < k < 50


def test_one_server_start_is_inconclusive_not_no_change() -> None:
    """Repetitions of one start share its offset: one start per side cannot decide, and
    the reason says to compare sets of runs (how many, when one side shows the spread)."""
    e = Estimate(10.0, 10.5, 0.05, None, None, 1, 1, reps_base=5, reps_new=5)
    state, reason = judge(TTFT, e, 0.40, S)
    assert state == INCONCLUSIVE and "one server start per side cannot separate" in reason
    assert "e.g. 3 per side" in reason
    e = Estimate(10.0, 20.0, 1.0, None, None, 3, 1, sd_base=0.2)
    state, reason = judge(TTFT, e, 0.40, S)
    assert state == INCONCLUSIVE and "one server start on the new side" in reason
    k = int(reason.split("about ")[1].split(" runs")[0])
    assert 2 <= k < 10 and "the base side’s start-to-start spread" in reason


def test_hit_rate_in_points() -> None:
    e = Estimate(0.50, 0.40, -10.0, -12.0, -8.0, 3, 3, 1.0, 1.0)
    assert judge(HIT, e, 2.0, S)[0] == REGRESSED
    assert judge(HIT, e, 15.0, S)[0] == NO_CHANGE


def test_no_value_in_either_run_is_not_available() -> None:
    e = Estimate(None, None, None, None, None, 0, 0)
    assert judge(TTFT, e, 0.40, S)[0] == NOT_AVAILABLE
    assert judge(TTFT, Estimate(10.0, None, None, None, None, 2, 0), 0.40, S)[0] == INCONCLUSIVE


def test_leaked_tokens_must_be_zero_whatever_the_statistics() -> None:
    assert judge(LEAK, Estimate(0, 96, None, None, None, 1, 1), 0.0, S)[0] == REGRESSED
    assert judge(LEAK, Estimate(0, 0, None, None, None, 1, 1), 0.0, S)[0] == NO_CHANGE
    assert judge(LEAK, Estimate(32, 0, None, None, None, 1, 1), 0.0, S)[0] == IMPROVED


def _group(per_rep_ttft: list[float], hits: list[float] | None = None, n: int = 24,
           sd: float = 0.3, seed: int = 0) -> Group:
    """Repetitions, each on its own server start, whose requests' TTFTs scatter (lognormal
    ``sd``) around the given levels."""
    rng = np.random.default_rng(seed)
    requests, rows = [], []
    for i, level in enumerate(per_rep_ttft):
        ttft = level * rng.lognormal(-sd ** 2 / 2, sd, n)
        prompt = np.full(n, 100.0)
        hit = 0.5 if hits is None else hits[i]
        requests.append({"ttft_ms": ttft, "cached_tokens": prompt * hit, "prompt_tokens": prompt})
        rows.append({"request_throughput": 1000 / level})
    return Group(requests, rows, list(range(len(rows))))


def test_a_tripled_mean_ttft_with_45pc_spread_regresses() -> None:
    """Issue 28 (3): a spread over max_cv (30%) made this inconclusive, which never failed."""
    base = _group([20.0, 21.0, 19.0, 20.5, 19.5], seed=1)
    spread = 1 + 0.45 * np.array([-1.26, -0.63, 0.0, 0.63, 1.26])  # CV 45% across repetitions
    new = _group(list(60.0 * spread), seed=2)
    values = [float(np.mean(r["ttft_ms"])) for r in new.requests]
    assert np.std(values, ddof=1) / np.mean(values) > 0.40
    e = estimate(TTFT, base, new, level=0.95)
    assert e.change == pytest.approx(2.0, abs=0.6)
    assert judge(TTFT, e, TTFT.threshold, S)[0] == REGRESSED


def test_a_325pp_hit_rate_drop_regresses() -> None:
    """Issue 28 (3): the spread of a small hit rate (5% and 10%) was relative to its mean."""
    base = _group([20.0, 20.0], hits=[0.40, 0.40])
    new = _group([20.0, 20.0], hits=[0.05, 0.10])
    e = estimate(HIT, base, new, level=0.95)
    assert e.change == pytest.approx(-32.5)
    assert e.high < 0
    assert judge(HIT, e, HIT.threshold, S)[0] == REGRESSED


def test_an_unchanged_hit_rate_in_every_repetition_is_exact() -> None:
    base, new = _group([20.0, 30.0]), _group([25.0, 22.0])
    e = estimate(HIT, base, new, level=0.95)
    assert (e.change, e.low, e.high) == (0.0, 0.0, 0.0)
    assert judge(HIT, e, HIT.threshold, S) == (NO_CHANGE, "the same in every repetition")
    e = estimate(HIT, base, _group([25.0, 22.0], hits=[0.49, 0.49]), level=0.95)
    assert e.low == e.high == pytest.approx(-1.0)
    assert judge(HIT, e, 0.5, S)[0] == REGRESSED  # an exact change beyond the threshold
    assert judge(HIT, e, HIT.threshold, S)[0] == NO_CHANGE


def test_a_powered_row_with_no_significant_change_passes():
    """An interval that reaches past the threshold still passes when the row would have
    caught twice the threshold 90% of the time (many starts, small standard error); with a
    large standard error it is underpowered and says what it would catch."""
    powered = Estimate(10.0, 10.4, 0.04, -0.005, 0.085, 40, 40, 0.05, 0.05, se=0.02, df=78)
    assert judge(TTFT, powered, 0.05, S) == (
        NO_CHANGE, "no significant change; a regression of +8% would be caught 90% of the time")
    weak = Estimate(10.0, 10.4, 0.04, -0.10, 0.20, 3, 3, 0.1, 0.1, se=0.07, df=4)
    state, reason = judge(TTFT, weak, 0.05, S)
    assert state == INCONCLUSIVE and "would catch only +" in reason
