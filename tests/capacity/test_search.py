"""The capacity search on simulated servers of known capacity: its stated interval covers the
true capacity, and it says when it cannot decide an end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.capacity.search import (
    ABOVE_MAX,
    BELOW_MIN,
    CONVERGED,
    SearchSettings,
    requests_to_show,
    search,
)
from bench.stats import wilson_interval

CAPACITY = 7.3  # requests/s at which the true attainment equals the target


def attainment(rate: float, target: float, width: float) -> float:
    """A server's true SLO attainment: near 1 at low load, the target at CAPACITY, falling
    over a relative load range of about ``width``."""
    x = math.log(rate / CAPACITY) / width
    return 1 / (1 + math.exp(4 * x - math.log(target / (1 - target))))


def test_a_sharp_knee_is_found_within_the_tolerance():
    cap = search(lambda rate, n: (n, n if rate <= CAPACITY else n // 2),
                 SearchSettings(target=0.95, requests=100))
    assert cap.stopped == CONVERGED and cap.monotone
    assert cap.low <= CAPACITY < cap.high <= cap.low * 1.10
    assert cap.to_dict()["loads"][0]["state"] == "meets"


@pytest.mark.parametrize(("target", "width", "requests"), [
    (0.99, 0.05, 100), (0.99, 0.2, 50), (0.9, 0.05, 50), (0.9, 0.2, 100)])
def test_the_stated_interval_covers_the_capacity(target: float, width: float, requests: int):
    """200 searches each (seeded): coverage at least the 95% the decisions are made at;
    where the knee is gradual some searches leave an end undecided (never a wrong one)."""
    covered, decided = 0, 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        cap = search(lambda rate, n, rng=rng: (
            n, int(rng.binomial(n, attainment(rate, target, width)))),
            SearchSettings(target=target, requests=requests))
        covered += (cap.low or 0.0) <= CAPACITY < (cap.high or math.inf)
        decided += cap.low is not None and cap.high is not None
    assert covered >= 0.95 * 200
    assert decided >= 0.5 * 200


def test_the_ends_of_the_load_range_are_said():
    always = search(lambda rate, n: (n, n), SearchSettings(target=0.9, max_rate=100.0))
    assert always.stopped == ABOVE_MAX and always.high is None and always.low == 64.0
    never = search(lambda rate, n: (n, 0), SearchSettings(target=0.9, min_rate=0.1))
    assert never.stopped == BELOW_MIN and never.low is None and never.high == 0.125


def test_requests_to_show_a_target():
    for target in (0.9, 0.95, 0.99):
        n = requests_to_show(target)
        assert wilson_interval(n, n)[0] >= target > wilson_interval(n - 1, n - 1)[0]
