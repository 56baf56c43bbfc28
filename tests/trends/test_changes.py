"""The change-point procedure on simulated series with known steps (tests/trends/simulated.py:
each entry a server start off by its own lognormal offset, sd 5%): its false-alarm rate on
same-build series and its detection rate of steps, as the issue asks of every statistical
procedure here (the figures measured: docs/trends.md)."""

from __future__ import annotations

import numpy as np
import pytest
from simulated import KEY, entry, series

from bench.registry import METRICS
from bench.trends.changes import changes, cusum_p_value
from bench.vocab import IMPROVED, REGRESSED

THROUGHPUT = METRICS["request_throughput"]
N = 200


def _rates(rng: np.random.Generator, step_at: int | None, **kw) -> tuple[float, float]:
    """(share of series with any change, share with a regression within one entry of the
    step)."""
    any_change = caught = 0
    for _ in range(N):
        found = changes(THROUGHPUT, series(rng, step_at=step_at, **kw), KEY, 0.05)
        any_change += bool(found)
        caught += step_at is not None and any(
            abs(c.index - step_at) <= 1 and c.state == REGRESSED for c in found)
    return any_change / N, caught / N


@pytest.mark.parametrize("starts", [1, 2])
def test_same_build_series_rarely_show_a_change(starts: int) -> None:
    rate, _ = _rates(np.random.default_rng(1), None, starts=starts)
    assert rate <= 0.05 + 3 * (0.05 * 0.95 / N) ** 0.5, rate  # 5% plus Monte Carlo error


@pytest.mark.parametrize(("step", "starts", "at_least"), [(-0.20, 1, 0.90), (-0.10, 2, 0.85)])
def test_a_step_is_found_at_its_run(step: float, starts: int, at_least: float) -> None:
    _, caught = _rates(np.random.default_rng(2), 10, step=step, starts=starts)
    assert caught >= at_least, caught


def test_the_size_and_interval_of_a_change() -> None:
    """A 30% drop with 3 starts per entry: one change, at the step, its interval covering
    the true size."""
    found = changes(THROUGHPUT, series(np.random.default_rng(3), step_at=6, step=-0.30,
                                       starts=3, n=12), KEY, 0.05)
    (c,) = found
    assert c.index == 6 and c.state == REGRESSED
    assert c.low <= -0.30 <= c.high and c.low < c.change < c.high


def test_a_deterministic_series_changes_exactly() -> None:
    """Values that never vary (a hit rate on a serial run): a step is exact."""
    y = np.r_[np.zeros(6), np.ones(6)]
    assert cusum_p_value(y) < 0.01 and cusum_p_value(np.zeros(12)) == 1.0


def test_exact_entries_change_wherever_they_differ() -> None:
    """Every entry repeated one value (a deterministic quantity): a one-run deviation is two
    exact changes, there and back, which a noisy series could not confirm; equal entries are
    no change. One noisy entry makes the series statistical again."""
    values = [53.0, 46.2, 46.2, 46.2, 46.2]
    found = changes(THROUGHPUT, [entry(i, [[v, v]]) for i, v in enumerate(values)], KEY, 0.05)
    (c,) = found
    assert c.index == 1 and c.low == c.change == c.high and c.state == REGRESSED
    assert c.change == pytest.approx(46.2 / 53.0 - 1)
    values = [46.2, 53.0, 46.2, 46.2, 46.2]
    found = changes(THROUGHPUT, [entry(i, [[v, v]]) for i, v in enumerate(values)], KEY, 0.05)
    assert [(c.index, c.state) for c in found] == [(1, IMPROVED), (2, REGRESSED)]
    assert not changes(THROUGHPUT, [entry(i, [[5.0, 5.0]]) for i in range(6)], KEY, 0.05)
    noisy = [entry(i, [[v, v]]) for i, v in enumerate(values)] + [entry(5, [[46.0, 46.4]])]
    assert not changes(THROUGHPUT, noisy, KEY, 0.05)
