import asyncio
import math

import numpy as np
import pytest

from bench.client.loadshape import arrival_offsets, dispatch
from bench.errors import BenchError


def intervals(offsets: list[float]) -> np.ndarray:
    return np.diff([0.0, *offsets])


def test_same_seed_same_offsets_other_seed_differs():
    assert arrival_offsets(50, 4.0, seed=7) == arrival_offsets(50, 4.0, seed=7)
    assert arrival_offsets(50, 4.0, seed=7) != arrival_offsets(50, 4.0, seed=8)


def test_inf_rate_sends_everything_at_once():
    assert arrival_offsets(5) == [0.0] * 5
    assert arrival_offsets(0, 3.0) == []


def test_offsets_cumulative_and_end_at_n_over_rate():
    offsets = arrival_offsets(100, 5.0, burstiness=0.5, seed=1)
    assert all(b >= a for a, b in zip(offsets, offsets[1:]))
    assert offsets[-1] == pytest.approx(100 / 5.0)  # vLLM's rescaling to n / rate


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_interval_statistics(burstiness):
    rate, n = 10.0, 20_000
    gaps = intervals(arrival_offsets(n, rate, burstiness=burstiness, seed=3))
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.01)
    # A gamma with shape k has coefficient of variation 1 / sqrt(k): 1 for Poisson.
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.05)


@pytest.mark.parametrize("burstiness", ["constant", math.inf])
def test_constant_intervals(burstiness):
    assert arrival_offsets(4, 2.0, burstiness=burstiness) == [0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize("kwargs", [{"n": -1}, {"rate": 0}, {"burstiness": 0}, {"burstiness": "bursty"}])
def test_bad_parameters_raise(kwargs):
    with pytest.raises(BenchError):
        arrival_offsets(**{"n": 3, "rate": 1.0, **kwargs})


class InFlight:
    """A ``send`` that holds each item 30 ms and records start times and peak concurrency."""

    def __init__(self) -> None:
        self.now, self.peak, self.started = 0, 0, {}

    async def send(self, item: int) -> None:
        self.started[item] = asyncio.get_running_loop().time()
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.03)
        self.now -= 1


def test_dispatch_respects_max_concurrency_and_offsets():
    tracker = InFlight()

    async def go() -> float:
        t0 = asyncio.get_running_loop().time()
        await dispatch(zip(range(12), [0.0] * 10 + [0.2, 0.2]), 3, tracker.send)
        return t0

    t0 = asyncio.run(go())
    assert tracker.peak == 3 and len(tracker.started) == 12
    assert tracker.started[10] - t0 >= 0.19  # not sent before its offset


def test_dispatch_unlimited_runs_all_at_once():
    tracker = InFlight()
    asyncio.run(dispatch(((i, 0.0) for i in range(20)), None, tracker.send))
    assert tracker.peak == 20


def test_dispatch_holds_only_the_sends_in_flight():
    """A long schedule is consumed as it goes: tasks exist for the sends in flight only."""
    consumed, most_tasks = [], [0]

    def schedule():
        for i in range(5000):
            consumed.append(i)
            yield i, 0.0

    async def send(item: int) -> None:
        most_tasks[0] = max(most_tasks[0], len(asyncio.all_tasks()))
        assert len(consumed) <= item + 5  # not read far ahead
        await asyncio.sleep(0)

    asyncio.run(dispatch(schedule(), 4, send))
    assert len(consumed) == 5000 and most_tasks[0] <= 4 + 1  # + the dispatcher


def test_dispatch_cancellation_cancels_in_flight_sends():
    cancelled = []

    async def send(item: int) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(item)
            raise

    async def go() -> None:
        task = asyncio.create_task(dispatch(zip([1, 2, 3], [0.0, 0.0, 5.0]), None, send))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert sorted(cancelled) == [1, 2]
