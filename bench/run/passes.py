"""Send a workload through request paths and salt modes; record each request as it ends.

A run is a sequence of passes, one per (path, salt mode) and repetition
(``--repeat``; see :func:`pass_order`). Each pass has a unique tag, all of one length (so
every pass sends prompts of the same token count), put before the first text of every
prompt, so passes (and earlier runs against the same server) never share cache keys.
Phases of a pass: ``warmup`` (excluded from metrics), optional ``prime`` (the workload
once, serially, so that ``measure`` sees a warm cache), ``measure`` (the workload at the
chosen load shape). Server counters are scraped, settled, before and after each measured
phase. After the pass, outside its timed window, every prompt it sent is rendered once
more by the server into ``layouts.jsonl``, from which every request is judged
(:mod:`bench.verdicts.requests`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import math
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
from rich.progress import Progress

from bench import SCHEMA_VERSION, aio, salts
from bench.client.connections import streaming
from bench.client.loadshape import arrival_offsets, dispatch
from bench.engine.target import Target
from bench.errors import BenchError
from bench.measured import counters
from bench.measured.records import Exchange, PassInfo, Record, RecordWriter
from bench.outputs import LAYOUTS_FILE, PASSES_FILE, RECORDS_FILE
from bench.paths import make_paths
from bench.paths.base import (
    PathContext,
    RequestPath,
    media_modalities,
    modality_label,
    tagged,
)
from bench.paths.media_urls import MediaUrls
from bench.run import layouts as layout_render
from bench.run.exchange import exchange, failed_exchange
from bench.run.replicas import PerReplica
from bench.run.resume import Resume
from bench.run.settings import RunOptions
from bench.run.workers import Workers, sender, slots, worker_count
from bench.vocab import MEASURE, Failure
from bench.workload import Workload

if TYPE_CHECKING:
    from bench.run.lockstep import Lockstep
    from bench.run.ray_workers import RayWorkers

log = logging.getLogger(__name__)
#: Records of the measured requests are written in batches at most this late (s).
RECORD_DELAY_S = 0.05


def pass_order(paths: list[RequestPath], salt_modes: list[str],
               repetition: int) -> list[tuple[RequestPath, str]]:
    """The (path, salt mode) passes of one repetition: odd repetitions run them in reverse
    (A B .. B A), so that a slow drift of the machine weighs on every pass alike."""
    order = [(path, mode) for path in paths for mode in salt_modes]
    return order[::-1] if repetition % 2 else order


class Runner:
    """Runs passes and writes, in ``out_dir``, ``records.jsonl`` as requests finish,
    ``layouts.jsonl`` after each pass and ``passes.jsonl`` when a pass is done.

    With ``resume``, finished passes and recorded requests are skipped, and the records'
    clock and ``seq`` go on from the last record (:mod:`bench.run.resume`).
    """

    def __init__(self, target: Target, workload: Workload, opts: RunOptions, out_dir: Path,
                 run_id: str, secret: str, progress: Progress | None = None,
                 resume: Resume | None = None) -> None:
        self.target, self.workload, self.opts = target, workload, opts
        self.out_dir, self.run_id, self.progress = out_dir, run_id, progress
        self.secret = secret  # raw salts are derived from it, never stored
        self.resume = resume
        self.passes: list[PassInfo] = []
        self.seq = resume.seq if resume else 0
        # A resumed run's clock starts just after its last record ended (the cache model
        # orders requests by it).
        self.t0 = time.perf_counter() - (resume.clock_s + 1e-3 if resume else 0.0)
        self.segment = resume.segment if resume else 0
        #: Why the run stopped early (the server is gone, the deadline passed), else None.
        self.stopped: str | None = None
        self.deadline: float | None = None
        self.hurry = asyncio.Event()  # set when the run stops early
        self._health: asyncio.Future | None = None
        self.paths: list[RequestPath] = []
        #: An A/B side's turns with the other side's runner (:mod:`bench.run.lockstep`).
        self.lockstep: Lockstep | None = None
        self.side = ""

    def turn(self) -> contextlib.AbstractAsyncContextManager:
        """This runner's next pass in lockstep with another (nothing to wait for alone)."""
        return self.lockstep.turn(self.side) if self.lockstep else contextlib.nullcontext()

    def salt_for(self, req: dict, salt_mode: str) -> str | None:
        if salt_mode == "none" or req["salt_ref"] is None:
            return None
        return salts.derive(self.secret, req["salt_ref"])

    def make_paths(self) -> list[RequestPath]:
        """The run's request paths, and how to send at its arrival times."""
        ctx = PathContext(self.target.base_url, self.target.model, self.workload.media,
                          MediaUrls(self.opts.media_url, self.target.media_dir),
                          self.opts.audio_part, self.opts.timeout_s,
                          self.target.zero_cached_omitted)
        paths = make_paths(self.opts.paths, ctx, self.opts.drop_salt_on)
        ctx.urls.preload((item.path, item.mime) for item in self.workload.media.values())
        n = self.workload.metadata["counts"]["requests"]
        #: Send at the workload's own arrival times (one streamed look decides) or generate.
        self.arrivals = None if self.opts.rate is None and all(
            r["arrival_s"] is not None for r in self.workload.requests()) else arrival_offsets(
            n, self.opts.rate or math.inf, self.opts.burstiness, self.opts.seed)
        return paths

    @contextlib.asynccontextmanager
    async def open_session(self) -> AsyncIterator[None]:
        """The HTTP session every request of this process goes through."""
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        async with aiohttp.ClientSession(connector=connector, headers=self.target.headers
                                         ) as session, streaming(self.target.headers):
            self.session = session
            self.servers = PerReplica(self.target, session, self.opts.max_concurrency == 1)
            yield

    async def run(self) -> list[PassInfo]:
        paths = self.paths = self.make_paths()
        n = self.workload.metadata["counts"]["requests"]
        if self.opts.deadline_s is not None:
            self.deadline = time.monotonic() + self.opts.deadline_s
        finished = self.resume.passes if self.resume else {}
        with RecordWriter(self.out_dir / RECORDS_FILE, RECORD_DELAY_S) as writer, \
                RecordWriter(self.out_dir / LAYOUTS_FILE) as layouts, \
                RecordWriter(self.out_dir / PASSES_FILE) as passes, \
                self.make_workers() as self.workers:
            async with self.open_session():
                self.writer = writer
                for repetition in range(self.opts.repeat):
                    for path, salt_mode in pass_order(paths, self.opts.salt_modes, repetition):
                        index = len(self.passes)
                        if index in finished:
                            self.passes.append(finished[index])
                            self.advance(n * (2 if self.opts.prime else 1)
                                         + min(self.opts.warmup, n))
                            continue
                        info = PassInfo(index, path.name, salt_mode,
                                        f"{self.run_id[-6:]}{index:04d}", repetition)
                        self.passes.append(info)
                        async with self.turn():
                            await self.run_pass(path, info)
                            if not self.stopped:
                                await self.write_layouts(path, info, layouts)
                        if not self.stopped:
                            passes.write(asdict(info))
        return self.passes

    def make_workers(self) -> Workers | RayWorkers:
        """The senders of the measured requests: processes of this machine, or Ray actors."""
        if self.opts.ray is None:
            return Workers(self.opts, self.out_dir, measure_in_worker)
        from bench.run.ray_workers import RayWorkers

        return RayWorkers(self.opts, self.workload, measure_in_worker, self.lost_share)

    def lost_share(self, info: PassInfo, worker: int, reason: str) -> None:
        """Record the measured requests of ``worker``'s share of the pass as failed: its
        sender was lost, with what it had sent (Ray returns a sender's records at its end)."""
        path = next(p for p in self.paths if p.name == info.path)
        workers, concurrency = worker_count(self.opts), self.opts.max_concurrency
        for i, (req, _) in enumerate(self.schedule(info)):
            if sender(i, workers, concurrency) == worker:
                record = self.head(path, info, req, MEASURE)
                record.update(failed_exchange(Failure.LOST, reason))
                record["end_s"] = round(time.perf_counter() - self.t0, 6)
                self.take(record)

    async def measure_share(self, info: PassInfo, worker: int, start: float) -> str | None:
        """In worker process ``worker``: send the measured requests of the pass that fall to
        its slots of the concurrency (:mod:`bench.run.workers`), on the common schedule
        from ``start`` (``time.perf_counter``, one clock for every process on Linux), with
        those slots; records go to ``self.writer``. Why the run stopped, if it did."""
        path = next(p for p in self.make_paths() if p.name == info.path)
        workers, concurrency = worker_count(self.opts), self.opts.max_concurrency
        share = (item for i, item in enumerate(self.schedule(info))
                 if sender(i, workers, concurrency) == worker)
        async with self.open_session():
            await asyncio.sleep(max(start - time.perf_counter(), 0.0))
            await dispatch(share, slots(worker, workers, concurrency),
                           lambda req: self.send(path, info, req, MEASURE), self.hurry)
        return self.stopped

    def todo(self, info: PassInfo, phase: str, limit: int | None = None) -> Iterator[dict]:
        """The workload's requests (the first ``limit``), streamed, less those of ``phase``
        recorded already when resuming (the progress bar counts those as done)."""
        for req in itertools.islice(self.workload.requests(), limit):
            if self.resume is not None and (info.index, phase, req["id"]) in self.resume.done:
                self.advance(1)
                continue
            yield req

    def schedule(self, info: PassInfo) -> Iterator[tuple[dict, float]]:
        """The measured requests still to send, each with its send offset from the first."""
        requests = zip(self.workload.requests(), self.arrivals or itertools.repeat(None))
        first = None
        for req, generated in requests:
            if self.resume is not None and (info.index, MEASURE, req["id"]) in self.resume.done:
                self.advance(1)
                continue
            offset = req["arrival_s"] if generated is None else generated
            first = offset if first is None else first
            yield req, offset - first

    def advance(self, n: int) -> None:
        if self.progress is not None and n:
            self.progress.advance(self.progress.task_ids[0], n)

    @property
    def deadline_reason(self) -> str:
        return f"the run deadline ({self.opts.deadline_s:g} s) passed"

    def stop(self, reason: str) -> None:
        """Stop the run early: every request not yet sent is recorded unsent with ``reason``."""
        if self.stopped is None:
            self.stopped = reason
            log.warning("stopping the run: %s", reason)
            self.hurry.set()
            if self.lockstep:
                self.lockstep.leave(self.side)

    async def run_pass(self, path: RequestPath, info: PassInfo) -> None:
        """Warm-up, prime and measure; a stopped run records the pass's requests unsent."""
        if self.opts.warmup and not self.stopped:
            warm = PassInfo(info.index, info.path, info.salt_mode, info.tag + "w", info.repetition)
            await self.send_serial(path, warm, self.todo(info, "warmup", self.opts.warmup),
                                   "warmup")
        if self.opts.prime and not self.stopped:
            await self.send_serial(path, info, self.todo(info, "prime"), "prime")
        before = await self.scrape(info)
        gc.freeze()  # no collection pauses in the pass to scan what lives through it
        start = time.perf_counter()
        try:
            if self.workers and not self.stopped:  # once stopped, the rest is unsent here
                for reason in await self.workers.measure(self.plan(), info, self.take):
                    self.stop(reason)
            else:
                await dispatch(self.schedule(info), self.opts.max_concurrency,
                               lambda req: self.send(path, info, req, MEASURE), self.hurry)
        finally:
            info.duration_s = time.perf_counter() - start
            gc.unfreeze()
        after = await self.scrape(info)
        if self.resume and info.index in self.resume.spans:
            info.duration_s += self.resume.spans[info.index]
            info.counters_error = ("resumed in the middle of this pass: the server's counters "
                                   "cover only its last part")
        elif before is not None and after is not None:
            try:
                info.counters, info.replicas = self.servers.delta(before, after)
            except counters.CountersReset as exc:
                info.counters_error = str(exc)

    async def scrape(self, info: PassInfo) -> dict[str, dict[str, float]] | None:
        """Settled counters of every server, or None (with the reason in ``info``) on a
        stopped run or a server that does not answer."""
        if self.stopped:
            info.counters_error = f"not scraped: {self.stopped}"
            return None
        try:
            return await self.servers.scrape()
        except BenchError as exc:
            info.counters_error = str(exc)
            await self.check_server()
            return None

    async def check_server(self) -> None:
        """After a connection failure: stop the run if ``/health`` does not answer (one
        probe at a time, three tries a second apart)."""
        if self._health is None or self._health.done():
            self._health = asyncio.ensure_future(self._probe_health())
        await asyncio.shield(self._health)

    async def _probe_health(self) -> None:
        url = f"{self.target.base_url}/health"
        for attempt in range(3):
            try:
                async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as r:
                    if r.status == 200:
                        return
                    why = f"HTTP {r.status}"
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if attempt < 2:
                await asyncio.sleep(1.0)
        self.stop(f"the server stopped answering (GET {url}: {why})")

    async def write_layouts(self, path: RequestPath, info: PassInfo,
                            writer: RecordWriter) -> None:
        """Render every prompt the pass sent (after it) and append the layouts as they come."""
        async def one(req: dict) -> None:
            shape = await layout_render.layout_or_error(
                self.session, path, tagged(req, info.tag), self.target.block_size)
            writer.write({"pass": info.index, "request_id": req["id"], **shape})

        await dispatch(((req, 0.0) for req in self.workload.requests()),
                       layout_render.CONCURRENCY, one)

    async def send_serial(self, path: RequestPath, info: PassInfo, reqs: Iterable[dict],
                          phase: str) -> None:
        for req in reqs:
            await self.send(path, info, req, phase)

    def head(self, path: RequestPath, info: PassInfo, req: dict, phase: str) -> Record:
        """A request's record before its outcome: what was sent, and when (now)."""
        modalities = [] if path.text_only else media_modalities(req)
        return {  # type: ignore[typeddict-unknown-key] - "pass"
            "schema_version": SCHEMA_VERSION, "run_id": self.run_id,
            "phase": phase, "pass": info.index, "path": path.name,
            "salt_mode": info.salt_mode,
            "salt_digest": salts.digest(self.salt_for(req, info.salt_mode)),
            "request_id": req["id"], "case": req["case"], "tenant": req["tenant"],
            "modality": modality_label(modalities), "oracle": req["oracle"]["expect"],
            "segment": self.segment, "start_s": round(time.perf_counter() - self.t0, 6),
        }

    async def send(self, path: RequestPath, info: PassInfo, req: dict, phase: str) -> None:
        """Build, send and record one request; failures become failed records."""
        salt = self.salt_for(req, info.salt_mode)
        record = self.head(path, info, req, phase)
        record.update(await self.servers.served(
            self.exchange(path, tagged(req, info.tag), req["max_tokens"], salt), record))
        record["end_s"] = round(time.perf_counter() - self.t0, 6)
        self.take(record)

    def take(self, record: Record) -> None:
        """Number a finished request's record (``seq``: the order in which requests
        finished) and write it."""
        self.seq += 1
        record["seq"] = self.seq
        self.writer.write(record)
        self.advance(1)

    def plan(self) -> WorkerPlan:
        """What a worker process needs to send as this runner does."""
        return WorkerPlan(self.target, self.workload, self.opts, self.out_dir, self.run_id,
                          self.secret, self.resume, self.t0, self.deadline)

    async def exchange(self, path: RequestPath, messages: list[dict], max_tokens: int,
                       salt: str | None) -> Exchange:
        """:func:`exchange` within the run deadline; unsent once the run has stopped."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.stop(self.deadline_reason)
        if self.stopped:
            return failed_exchange(Failure.NOT_SENT, f"not sent: {self.stopped}")
        sending = exchange(self.session, path, messages, max_tokens, salt, self.opts.timeout_s,
                           connect_timeout_s=self.opts.connect_timeout_s,
                           first_byte_timeout_s=self.opts.first_byte_timeout_s)
        try:
            out = await asyncio.wait_for(
                sending, None if self.deadline is None else self.deadline - time.monotonic())
        except asyncio.TimeoutError:
            self.stop(self.deadline_reason)
            return failed_exchange(Failure.DEADLINE, f"cut off: {self.deadline_reason}")
        if out["failure"] in (Failure.CONNECT, Failure.RESET):
            await self.check_server()
        return out


@dataclass(frozen=True)
class WorkerPlan:
    """What a worker process needs to send its share of a pass as the main runner would:
    picklable, and nothing more (no session, writer or progress)."""

    target: Target
    workload: Workload
    opts: RunOptions
    out_dir: Path
    run_id: str
    secret: str = field(repr=False)
    resume: Resume | None
    t0: float  # the main runner's clock origin (perf_counter: one clock for all processes)
    deadline: float | None


def measure_in_worker(plan: WorkerPlan, info: PassInfo, worker: int, start: float,
                      part: Path) -> str | None:
    """A worker's task (:mod:`bench.run.workers`): a runner built from ``plan`` sends the
    worker's share of the pass into ``part``; why the run stopped, if it did."""
    runner = Runner(plan.target, plan.workload, plan.opts, plan.out_dir, plan.run_id,
                    plan.secret, resume=plan.resume)
    runner.t0, runner.deadline = plan.t0, plan.deadline
    with RecordWriter(part, RECORD_DELAY_S) as runner.writer:
        return aio.run(runner.measure_share(info, worker, start))
