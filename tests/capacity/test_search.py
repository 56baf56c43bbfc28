"""The capacity search on simulated servers of known capacity: its interval covers the true
capacity, where the misses are independent and where they come in runs (a queue), and it
says when it cannot tell an end."""

from __future__ import annotations

import math

import numpy as np
import pytest
from simulated_queue import Queue

from bench.capacity.fit import fit_capacity, fit_cost
from bench.capacity.search import (
    ABOVE_MAX,
    BELOW_MIN,
    CONVERGED,
    SearchSettings,
    search,
    search_interleaved,
)

CAPACITY = 7.3  # requests/s at which the true attainment equals the target


def attainment(rate: float, target: float, width: float) -> float:
    """A server's true SLO attainment: near 1 at low load, the target at CAPACITY, falling
    over a relative load range of about ``width``."""
    x = math.log(rate / CAPACITY) / width
    return 1 / (1 + math.exp(4 * x - math.log(target / (1 - target))))


def test_a_steep_knee_is_found_within_the_precision():
    cap = search(lambda rate, n: (n, round(n * attainment(rate, 0.95, 0.02))),
                 SearchSettings(target=0.95, requests=100))
    fit = cap.fit
    assert cap.stopped == CONVERGED and cap.told
    assert fit.low <= CAPACITY <= fit.high <= fit.low * 1.25
    assert cap.to_dict()["estimate"] == pytest.approx(CAPACITY, rel=0.05)


@pytest.mark.parametrize(("target", "width", "requests"), [
    (0.99, 0.05, 100), (0.99, 0.2, 50), (0.9, 0.05, 50), (0.9, 0.2, 100)])
def test_the_interval_covers_the_capacity_with_independent_misses(
        target: float, width: float, requests: int):
    """200 searches each (seeded): coverage at least 95%, and most tell both ends."""
    covered, told = 0, 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        cap = search(lambda rate, n, rng=rng: (
            n, int(rng.binomial(n, attainment(rate, target, width)))),
            SearchSettings(target=target, requests=requests))
        fit = cap.fit
        covered += (fit.low or 0.0) <= CAPACITY <= (fit.high or math.inf)
        told += cap.told
    assert covered >= 0.95 * 200
    assert told >= 0.5 * 200


@pytest.mark.parametrize(("queue", "target"), [(Queue(), 0.95), (Queue(cv=0.3), 0.99)])
def test_the_interval_covers_the_capacity_of_a_queue(queue: Queue, target: float):
    """Misses in runs (a first-come-first-served queue): a probe's variance is several times
    the binomial one, and pooling a load's requests as independent covered in about half of
    the searches. 100 searches: coverage at least 90% (95% expected; the benchmark
    tests/benchmarks/capacity_coverage.py measures it over 400)."""
    settings = SearchSettings(target=target)
    true = queue.capacity(target, settings.requests)
    assert queue.design_effect(true, settings.requests) > 2
    covered = 0
    for seed in range(100):
        rng = np.random.default_rng([7, seed])
        fit = search(lambda rate, n, rng=rng: (n, int(queue.good(rate, n, 1, rng)[0])),
                     settings).fit
        covered += (fit.low or 0.0) <= true <= (fit.high or math.inf)
    assert covered >= 90


def test_the_ends_of_the_load_range_are_said():
    always = search(lambda rate, n: (n, n), SearchSettings(target=0.9, max_rate=100.0))
    assert always.stopped == ABOVE_MAX and always.fit.high is None
    never = search(lambda rate, n: (n, 0), SearchSettings(target=0.9, min_rate=0.1))
    assert never.stopped == BELOW_MIN and never.fit.low is None


def test_a_fit_says_why_it_has_no_interval():
    assert fit_capacity([(1.0, 100, 100), (2.0, 100, 90)], 0.95).why.startswith("fewer than")
    # A knee too steep for the curve: the estimate is the bracket's middle, and an end only
    # where a load decided it on its own (100 of 100 does not show 95% at 99%).
    separated = fit_capacity([(1.0, 100, 100), (2.0, 100, 100), (4.0, 100, 0)], 0.95)
    assert "separate" in separated.why and separated.estimate == pytest.approx(8 ** 0.5)
    assert separated.low is None and separated.high == 4.0
    assert fit_capacity([(1.0, 400, 400), (2.0, 100, 100), (4.0, 100, 0)], 0.95).low == 1.0
    rising = fit_capacity([(1.0, 100, 80), (2.0, 100, 90), (4.0, 100, 99)], 0.95)
    assert rising.low is None and "does not fall" in rising.why
    flat = fit_capacity([(1.0, 100, 96), (2.0, 100, 90), (4.0, 100, 97), (8.0, 100, 92)], 0.95)
    assert flat.high is None and flat.dispersion >= 1.0


def test_overdispersion_widens_the_interval():
    """The same attainment per load, once with probes that agree and once with probes that
    scatter: the scattered ones leave the capacity untold at the same estimate."""
    rates = [1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 8.0, 8.0]
    calm = fit_capacity(list(zip(rates, [100] * 8, [100, 100, 99, 99, 96, 96, 80, 80])), 0.95)
    scattered = fit_capacity(list(zip(rates, [100] * 8, [100, 100, 100, 98, 100, 92, 90, 70])),
                             0.95)
    assert calm.dispersion == 1.0 < 2 < scattered.dispersion
    assert calm.estimate == pytest.approx(scattered.estimate)
    assert calm.low < calm.estimate < calm.high and scattered.high is None


def test_the_cost_interval_covers_the_cost_of_a_slower_salted_queue():
    """A salted queue 10% slower per request (near capacity that costs about a quarter of
    it), searched interleaved with the unsalted one as the capacity command does: the cost
    of salting's interval holds the true cost in at least 90% of 60 searches (95% expected;
    the benchmark measures it over more)."""
    none, salted = Queue(), Queue(service=0.22)
    settings = SearchSettings()
    true = 1 - (salted.capacity(settings.target, settings.requests)
                / none.capacity(settings.target, settings.requests))
    assert 0.1 < true < 0.4
    covered = 0
    for seed in range(60):
        rng = np.random.default_rng([11, seed])
        caps = search_interleaved(
            {mode: lambda rate, n, q=q, rng=rng: (n, int(q.good(rate, n, 1, rng)[0]))
             for mode, q in (("none", none), ("salted", salted))}, settings, seed=seed)
        cost = fit_cost(caps["none"].probes, caps["salted"].probes, settings.target)
        covered += (cost.low if cost.low is not None else -math.inf) <= true <= (
            cost.high if cost.high is not None else math.inf)
    assert covered >= 54
