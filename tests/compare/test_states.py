"""The four states of a metric: a regression needs an interval that excludes no change AND
a change beyond the threshold; too few samples or too much spread are inconclusive."""

from __future__ import annotations

import numpy as np
import pytest

from bench.compare.bootstrap import Estimate, estimate
from bench.compare.pair import judge
from bench.compare.samples import Group
from bench.compare.thresholds import Settings
from bench.registry import METRICS
from bench.vocab import IMPROVED, INCONCLUSIVE, NO_CHANGE, REGRESSED

S = Settings()
TTFT, TPUT, HIT, LEAK = (METRICS[n] for n in ("mean_ttft_ms", "request_throughput", "hit_rate",
                                               "leaked_tokens"))


def est(change: float, low: float, high: float, n: int = 20) -> Estimate:
    return Estimate(10.0, 10.0 * (1 + change), change, low, high, n, n)


@pytest.mark.parametrize(("metric", "e", "threshold", "state"), [
    (TTFT, est(0.30, 0.20, 0.40), 0.10, REGRESSED),
    (TTFT, est(0.05, 0.02, 0.08), 0.10, NO_CHANGE),       # significant, within threshold
    (TTFT, est(0.30, -0.05, 0.60), 0.10, NO_CHANGE),      # beyond threshold, not significant
    (TTFT, est(-0.30, -0.40, -0.20), 0.10, IMPROVED),
    (TPUT, est(-0.30, -0.40, -0.20), 0.10, REGRESSED),    # higher is better
    (TPUT, est(0.30, 0.20, 0.40), 0.10, IMPROVED),
    (TTFT, est(0.30, 0.20, 0.40, n=3), 0.10, INCONCLUSIVE),
])
def test_states(metric, e: Estimate, threshold: float, state: str) -> None:
    assert judge(metric, e, threshold, S, None)[0] == state


def test_hit_rate_in_points() -> None:
    e = Estimate(0.50, 0.40, -10.0, -12.0, -8.0, 20, 20)
    assert judge(HIT, e, 2.0, S, None)[0] == REGRESSED
    assert judge(HIT, e, 15.0, S, None)[0] == NO_CHANGE


def test_spread_over_the_limit_is_inconclusive() -> None:
    state, reason = judge(TTFT, est(0.30, 0.20, 0.40), 0.10, S, cv=0.5)
    assert state == INCONCLUSIVE and "spread" in reason


def test_leaked_tokens_must_be_zero_whatever_the_statistics() -> None:
    assert judge(LEAK, Estimate(0, 96, None, None, None, 1, 1), 0.0, S, None)[0] == REGRESSED
    assert judge(LEAK, Estimate(0, 0, None, None, None, 1, 1), 0.0, S, None)[0] == NO_CHANGE
    assert judge(LEAK, Estimate(32, 0, None, None, None, 1, 1), 0.0, S, None)[0] == IMPROVED


def _group(rng: np.random.Generator, scale: float, reps: int, n: int) -> Group:
    requests = []
    for _ in range(reps):
        ttft = rng.lognormal(np.log(20 * scale), 0.3, n)
        requests.append({"ttft_ms": ttft, "cached_tokens": np.full(n, 32.0),
                         "prompt_tokens": np.full(n, 64.0)})
    return Group(requests=requests, rows=[{"request_throughput": 10 / scale} for _ in range(reps)])


def test_bootstrap_interval_covers_the_true_shift_and_sees_no_change_in_noise() -> None:
    rng = np.random.default_rng(1)
    base = _group(rng, 1.0, 3, 40)
    slower = _group(rng, 1.5, 3, 40)
    same = _group(rng, 1.0, 3, 40)
    e = estimate(TTFT, base, slower, level=0.95, resamples=1000, seed=0)
    assert e.low < 0.5 < e.high and e.low > 0 and e.n_base == 120
    e = estimate(TTFT, base, same, level=0.95, resamples=1000, seed=0)
    assert e.low < 0 < e.high
    e = estimate(HIT, base, same, level=0.95, resamples=200, seed=0)
    assert e.change == 0 and e.base == 0.5
    e = estimate(TPUT, base, slower, level=0.95, resamples=200, seed=0)
    assert e.n_base == 3 and e.change == pytest.approx(1 / 1.5 - 1)
