"""When requests are sent: arrival offsets as ``vllm bench serve`` draws them, and dispatch.

``arrival_offsets`` follows ``get_request`` in ``vllm/benchmarks/serve.py`` (without
ramp-up): gamma-distributed intervals with shape ``burstiness`` and scale
``1 / (rate * burstiness)``, summed, then rescaled so that the last offset is exactly
``n / rate``. ``dispatch`` then mirrors its semaphore: a request starts at its offset
but waits for a free slot when ``max_concurrency`` are in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Literal, TypeVar

import numpy as np

from bench.errors import BenchError

T = TypeVar("T")


def arrival_offsets(
    n: int,
    rate: float = math.inf,
    burstiness: float | Literal["constant"] = 1.0,
    seed: int = 0,
) -> list[float]:
    """Cumulative send offsets in seconds for ``n`` requests at ``rate`` requests/s.

    ``rate=inf`` sends everything at once (all offsets 0). ``burstiness`` 1 is a Poisson
    process, below 1 burstier, above 1 more even; ``"constant"`` (or ``inf``, vLLM's
    spelling) makes every interval exactly ``1 / rate``. Draws come from
    ``numpy.random.default_rng(seed)``, so a seed always gives the same offsets.
    """
    if n < 0:
        raise BenchError(f"request count must be >= 0, got {n}")
    if not rate > 0:
        raise BenchError(f"request rate must be > 0 (or inf), got {rate}")
    if burstiness == "constant":
        burstiness = math.inf
    if not isinstance(burstiness, (int, float)) or not burstiness > 0:
        raise BenchError(f"burstiness must be > 0 or 'constant', got {burstiness!r}")
    if n == 0 or math.isinf(rate):
        return [0.0] * n
    if math.isinf(burstiness):
        intervals = np.full(n, 1.0 / rate)
    else:
        rng = np.random.default_rng(seed)
        intervals = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    offsets = np.cumsum(intervals)
    offsets *= (n / rate) / offsets[-1]
    return offsets.tolist()


async def dispatch(
    schedule: Iterable[tuple[T, float]],
    max_concurrency: int | None,
    send: Callable[[T], Awaitable[None]],
    hurry: asyncio.Event | None = None,
) -> None:
    """Start ``send(item)`` at each ``(item, offset)`` of ``schedule`` after one common
    start; await them all.

    At most ``max_concurrency`` sends run at once (``None``: unlimited); a send that is due
    while all slots are taken starts when one frees, in schedule order. The schedule is
    consumed as sends start, and only sends in flight exist as tasks, so a long workload
    is never held in memory. Once ``hurry`` is set, the remaining sends start at once (a
    stopping run records them unsent without waiting for their times). If the dispatch is
    cancelled or a send raises, the sends in flight are cancelled and awaited before this
    returns.
    """
    if max_concurrency is not None and max_concurrency < 1:
        raise BenchError(f"max concurrency must be >= 1 or unlimited, got {max_concurrency}")
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency is not None else None
    in_flight: set[asyncio.Task[None]] = set()
    failed: list[BaseException] = []

    def finished(task: asyncio.Task[None]) -> None:
        in_flight.discard(task)
        if slots is not None:
            slots.release()
        if not task.cancelled() and task.exception() is not None:
            failed.append(task.exception())

    start = time.perf_counter()
    try:
        for item, offset in schedule:
            delay = start + offset - time.perf_counter()
            if delay > 0 and not (hurry and hurry.is_set()):
                if hurry is None:
                    await asyncio.sleep(delay)
                else:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(hurry.wait(), delay)
            if slots is not None:
                await slots.acquire()
            if failed:
                break
            task = asyncio.create_task(send(item))
            in_flight.add(task)
            task.add_done_callback(finished)
        while in_flight and not failed:
            await asyncio.wait(set(in_flight), return_when=asyncio.FIRST_COMPLETED)
        if failed:
            raise failed[0]
    finally:
        for task in list(in_flight):
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
