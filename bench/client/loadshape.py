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
from collections.abc import Awaitable, Callable, Sequence
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
    items: Sequence[T],
    offsets: Sequence[float],
    max_concurrency: int | None,
    send: Callable[[T], Awaitable[None]],
    hurry: asyncio.Event | None = None,
) -> None:
    """Start ``send(item)`` at each offset after one common start; await them all.

    At most ``max_concurrency`` sends run at once (``None``: unlimited); a send that is due
    while all slots are taken starts when one frees. Once ``hurry`` is set, the remaining
    sends start at once (a stopping run records them unsent without waiting for their
    times). If the dispatch is cancelled or a send raises, the sends in flight are
    cancelled and awaited before this returns.
    """
    if len(items) != len(offsets):
        raise ValueError(f"{len(items)} items but {len(offsets)} offsets")
    if max_concurrency is not None and max_concurrency < 1:
        raise BenchError(f"max concurrency must be >= 1 or unlimited, got {max_concurrency}")
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency is not None else None

    async def run(item: T) -> None:
        if slots is None:
            await send(item)
            return
        async with slots:
            await send(item)

    tasks: list[asyncio.Task[None]] = []
    start = time.perf_counter()
    try:
        for item, offset in zip(items, offsets):
            delay = start + offset - time.perf_counter()
            if delay > 0 and not (hurry and hurry.is_set()):
                if hurry is None:
                    await asyncio.sleep(delay)
                else:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(hurry.wait(), delay)
            tasks.append(asyncio.create_task(run(item)))
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
