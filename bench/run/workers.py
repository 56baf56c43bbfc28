"""``--workers N``: the measured requests of a pass sent by N processes instead of one.

The concurrency C is split, not copied: worker k owns the slots j < C with j % N == k, so
at most C requests are in flight in all, and there are never more workers than slots
(``--workers`` above ``--max-concurrency`` runs C workers). Each worker process opens the
workload and the run's paths itself and sends the requests of the pass's schedule that
fall to its slots (request i to the owner of slot i % C: shares in proportion to the
slots), all on one common start time and clock; its records go to a part file that the
main process merges into ``records.jsonl`` after the pass (in the order they finished,
with the run's ``seq``), also when the pass is interrupted. Counters, warm-up, prime and
layouts stay in the main process. Workers die with the main process (PR_SET_PDEATHSIG).

What a worker runs is given, not imported: the runner hands :class:`Workers` its task (a
module-level function) and an explicit picklable plan of what the task needs.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import multiprocessing
import multiprocessing.pool
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.engine.reaper import die_with_parent
from bench.measured.records import PassInfo, iter_records
from bench.outputs import RECORDS_FILE
from bench.run.settings import RunOptions

log = logging.getLogger(__name__)
#: Time for every worker to be ready before the common start (s).
LEAD_S = 0.5
#: A worker's task: (plan, pass, worker index, common start, part file) -> why the run
#: stopped, if it did. A module-level function, so that it pickles by name.
Task = Callable[[Any, PassInfo, int, float, Path], "str | None"]


def worker_count(opts: RunOptions) -> int:
    """The processes that send: ``opts.workers``, at most one per slot of the concurrency."""
    return min(opts.workers, opts.max_concurrency or opts.workers)


def slots(worker: int, workers: int, concurrency: int | None) -> int | None:
    """Worker ``worker``'s slots of the ``concurrency`` (``None``: unlimited): the slots j
    with ``j % workers == worker``, so the shares sum to the concurrency."""
    return None if concurrency is None else len(range(worker, concurrency, workers))


def sender(i: int, workers: int, concurrency: int | None) -> int:
    """The worker that sends the ``i``-th request of a pass: the owner of slot
    ``i % concurrency`` (every ``workers``-th request when the concurrency is unlimited)."""
    return (i if concurrency is None else i % concurrency) % workers


def _init() -> None:
    """In each worker: killed with the main process; Ctrl-C is the main process's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


class Workers:
    """The worker pool of a run (none with ``workers`` 1); a context manager."""

    def __init__(self, opts: RunOptions, out_dir: Path, task: Task) -> None:
        self.opts, self.out_dir, self.task = opts, out_dir, task
        self.count = worker_count(opts)
        self.pool: multiprocessing.pool.Pool | None = None

    def __bool__(self) -> bool:
        return self.count > 1

    def __enter__(self) -> Workers:
        if self.count < self.opts.workers:
            log.warning("--workers %d: %d worker(s), one per slot of --max-concurrency %d",
                        self.opts.workers, self.count, self.opts.max_concurrency)
        if self:
            ctx = multiprocessing.get_context("spawn")
            self.pool = ctx.Pool(self.count, initializer=_init)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()

    def parts(self) -> list[Path]:
        return [self.out_dir / f".{RECORDS_FILE}.w{k}" for k in range(self.count)]

    async def measure(self, plan: object, info: PassInfo, take: Callable[[dict], None]
                      ) -> list[str]:
        """Send the pass's measured requests from the workers (each runs the task on
        ``plan``) and hand their records to ``take`` in the order they finished, also when
        interrupted; why the run stopped in any worker."""
        loop = asyncio.get_running_loop()
        start = time.perf_counter() + LEAD_S
        futures = []
        for k, part in enumerate(self.parts()):
            future = loop.create_future()
            self.pool.apply_async(  # type: ignore[union-attr]
                self.task, (plan, info, k, start, part),
                callback=lambda r, f=future: loop.call_soon_threadsafe(f.set_result, r),
                error_callback=lambda e, f=future: loop.call_soon_threadsafe(f.set_exception, e))
            futures.append(future)
        try:
            stopped = await asyncio.gather(*futures)
        finally:
            self.merge(take)
        return [reason for reason in stopped if reason]

    def merge(self, take: Callable[[dict], None]) -> None:
        """Hand the workers' records to ``take`` in the order they finished (each part is in
        that order already: they are merged as they are read), then drop the parts."""
        parts = [iter_records(part) for part in self.parts() if part.exists()]
        for r in heapq.merge(*parts, key=lambda r: r["end_s"]):
            take(r)
        for part in self.parts():
            part.unlink(missing_ok=True)
