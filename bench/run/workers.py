"""``--workers N``: the measured requests of a pass sent by N processes instead of one.

Each worker process opens the workload and the run's paths itself and sends every N-th
request of the pass's schedule (from its own index), all on one common start time and
clock, at 1/N of the concurrency (rounded up); its records go to a part file that the main
process merges into ``records.jsonl`` after the pass (in the order they finished, with
the run's ``seq``), also when the pass is interrupted. Counters, warm-up, prime and layouts
stay in the main process. Workers die with the main process (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import asyncio
import heapq
import multiprocessing
import multiprocessing.pool
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench import aio
from bench.engine.reaper import die_with_parent
from bench.outputs import RECORDS_FILE
from bench.run.records import PassInfo, RecordWriter, iter_records

if TYPE_CHECKING:
    from bench.run.passes import Runner

#: Time for every worker to be ready before the common start (s).
LEAD_S = 0.5


def _init() -> None:
    """In each worker: killed with the main process; Ctrl-C is the main process's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


class Workers:
    """The worker pool of a run (none with ``workers`` 1); a context manager."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.pool: multiprocessing.pool.Pool | None = None

    def __bool__(self) -> bool:
        return self.runner.opts.workers > 1

    def __enter__(self) -> Workers:
        if self:
            ctx = multiprocessing.get_context("spawn")
            self.pool = ctx.Pool(self.runner.opts.workers, initializer=_init)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()

    def parts(self) -> list[Path]:
        return [self.runner.out_dir / f".{RECORDS_FILE}.w{k}" for k in
                range(self.runner.opts.workers)]

    async def measure(self, info: PassInfo) -> None:
        """Send the pass's measured requests from the workers and merge their records."""
        runner, loop = self.runner, asyncio.get_running_loop()
        # What a worker needs of this process's runner (it is pickled): not its session.
        state = {k: v for k, v in vars(runner).items()
                 if k not in ("session", "writer", "servers", "workers", "progress", "_health",
                              "hurry")}
        start = time.perf_counter() + LEAD_S
        futures = []
        for k, part in enumerate(self.parts()):
            future = loop.create_future()
            self.pool.apply_async(  # type: ignore[union-attr]
                _worker, (state, info, k, start, part),
                callback=lambda r, f=future: loop.call_soon_threadsafe(f.set_result, r),
                error_callback=lambda e, f=future: loop.call_soon_threadsafe(f.set_exception, e))
            futures.append(future)
        try:
            stopped = await asyncio.gather(*futures)
        finally:
            self.merge()
        for reason in filter(None, stopped):
            runner.stop(reason)

    def merge(self) -> None:
        """Append the workers' records in the order they finished, numbered on from ``seq``
        (each part is in that order already: they are merged as they are read)."""
        parts = [iter_records(part) for part in self.parts() if part.exists()]
        merged = 0
        for r in heapq.merge(*parts, key=lambda r: r["end_s"]):
            self.runner.seq += 1
            r["seq"] = self.runner.seq
            self.runner.writer.write(r)
            merged += 1
        self.runner.advance(merged)
        for part in self.parts():
            part.unlink(missing_ok=True)


def _worker(state: dict, info: PassInfo, worker: int, start: float, part: Path) -> str | None:
    """In a worker: a runner like the main one sends this worker's share into ``part``; why
    the run stopped, if it did."""
    from bench.run.passes import RECORD_DELAY_S, Runner

    runner = Runner.__new__(Runner)
    vars(runner).update(state, hurry=asyncio.Event(), _health=None, progress=None)
    with RecordWriter(part, RECORD_DELAY_S) as runner.writer:
        return aio.run(runner.measure_share(info, worker, start))
