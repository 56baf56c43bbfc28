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
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
from rich.progress import Progress

from bench import SCHEMA_VERSION, salts
from bench.client.loadshape import arrival_offsets, dispatch
from bench.client.stream import CONNECT_TIMEOUT_S
from bench.engine.target import Target
from bench.errors import BenchError
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
from bench.run import counters
from bench.run.exchange import exchange, failed_exchange
from bench.run.layouts import render_layouts
from bench.run.records import Exchange, PassInfo, Record, RecordWriter
from bench.vocab import MEASURE, SALT_MODES, Failure
from bench.workload import Workload

if TYPE_CHECKING:
    from bench.run.resume import Resume

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    """How to send the workload (recorded in the results)."""

    paths: list[str]
    salt_modes: list[str] = field(default_factory=lambda: list(SALT_MODES))
    rate: float | None = None  # None: the workload's arrival times, else all at once
    burstiness: float = 1.0
    max_concurrency: int | None = 1
    warmup: int = 2
    prime: bool = False
    timeout_s: float = 600.0  # per request, in all
    connect_timeout_s: float = CONNECT_TIMEOUT_S  # per request, to open its connection
    first_byte_timeout_s: float | None = None  # per request, from its send to a first byte
    media_url: str = "data"
    audio_part: str = "audio_url"
    seed: int = 0
    repeat: int = 1
    #: Stop sending after this many seconds (None: no deadline); what is left is unsent.
    deadline_s: float | None = None
    #: Test-only: paths whose builder drops the salt (proves that a leak is caught).
    drop_salt_on: tuple[str, ...] = ()


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

    def salt_for(self, req: dict, salt_mode: str) -> str | None:
        if salt_mode == "none" or req["salt_ref"] is None:
            return None
        return salts.derive(self.secret, req["salt_ref"])

    async def run(self) -> list[PassInfo]:
        ctx = PathContext(self.target.base_url, self.target.model, self.workload.media,
                          MediaUrls(self.opts.media_url, self.target.media_dir),
                          self.opts.audio_part, self.opts.timeout_s,
                          self.target.zero_cached_omitted)
        paths = make_paths(self.opts.paths, ctx, self.opts.drop_salt_on)
        if self.opts.media_url == "file":  # every file must be servable before anything runs
            for item in self.workload.media.values():
                ctx.urls.url(item.path, item.mime)
        reqs = list(self.workload.requests())
        if self.opts.deadline_s is not None:
            self.deadline = time.monotonic() + self.opts.deadline_s
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        finished = self.resume.passes if self.resume else {}
        with RecordWriter(self.out_dir / RECORDS_FILE) as writer, \
                RecordWriter(self.out_dir / LAYOUTS_FILE) as layouts, \
                RecordWriter(self.out_dir / PASSES_FILE) as passes:
            async with aiohttp.ClientSession(connector=connector,
                                             headers=self.target.headers) as session:
                self.session, self.writer = session, writer
                for repetition in range(self.opts.repeat):
                    for path, salt_mode in pass_order(paths, self.opts.salt_modes, repetition):
                        index = len(self.passes)
                        if index in finished:
                            self.passes.append(finished[index])
                            self.advance(len(reqs) * (2 if self.opts.prime else 1)
                                         + min(self.opts.warmup, len(reqs)))
                            continue
                        info = PassInfo(index, path.name, salt_mode,
                                        f"{self.run_id[-6:]}{index:04d}", repetition)
                        self.passes.append(info)
                        await self.run_pass(path, info, reqs)
                        if not self.stopped:
                            await self.write_layouts(path, info, reqs, layouts)
                            passes.write(asdict(info))
        return self.passes

    def todo(self, info: PassInfo, reqs: list[dict], phase: str) -> list[dict]:
        """The requests of ``phase`` not recorded yet (all of them unless resuming); the
        progress bar counts the others as done."""
        if self.resume is None:
            return reqs
        left = [r for r in reqs if (info.index, phase, r["id"]) not in self.resume.done]
        self.advance(len(reqs) - len(left))
        return left

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

    async def run_pass(self, path: RequestPath, info: PassInfo, reqs: list[dict]) -> None:
        """Warm-up, prime and measure; a stopped run records the pass's requests unsent."""
        if self.opts.warmup and not self.stopped:
            warm = PassInfo(info.index, info.path, info.salt_mode, info.tag + "w", info.repetition)
            await self.send_serial(path, warm, self.todo(info, reqs[: self.opts.warmup],
                                                         "warmup"), "warmup")
        if self.opts.prime and not self.stopped:
            await self.send_serial(path, info, self.todo(info, reqs, "prime"), "prime")
        before = await self.scrape(info)
        offsets = dict(zip((r["id"] for r in reqs), self.offsets(reqs)))
        left = self.todo(info, reqs, MEASURE)
        first = min((offsets[r["id"]] for r in left), default=0.0)
        start = time.perf_counter()
        await dispatch(left, [offsets[r["id"]] - first for r in left], self.opts.max_concurrency,
                       lambda req: self.send(path, info, req, MEASURE), self.hurry)
        info.duration_s = time.perf_counter() - start
        after = await self.scrape(info)
        if self.resume and info.index in self.resume.spans:
            info.duration_s += self.resume.spans[info.index]
            info.counters_error = ("resumed in the middle of this pass: the server's counters "
                                   "cover only its last part")
        elif before is not None and after is not None:
            try:
                info.counters = counters.delta(before, after)
            except counters.CountersReset as exc:
                info.counters_error = str(exc)

    async def scrape(self, info: PassInfo) -> dict[str, float] | None:
        """Settled counters, or None (with the reason in ``info``) on a stopped run or a
        server that does not answer."""
        if self.stopped:
            info.counters_error = f"not scraped: {self.stopped}"
            return None
        try:
            return await counters.settled_scrape(self.session, self.target.base_url)
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

    async def write_layouts(self, path: RequestPath, info: PassInfo, reqs: list[dict],
                            writer: RecordWriter) -> None:
        """Render every prompt the pass sent (after it) and append the layouts."""
        prompts = {req["id"]: tagged(req, info.tag) for req in reqs}
        rendered = await render_layouts(self.session, path, prompts, self.target.block_size)
        for request_id, shape in rendered.items():
            writer.write({"pass": info.index, "request_id": request_id, **shape})

    def offsets(self, reqs: list[dict]) -> list[float]:
        """Send times: the workload's own arrivals unless ``--rate`` is given."""
        if self.opts.rate is None and all(r["arrival_s"] is not None for r in reqs):
            return [r["arrival_s"] for r in reqs]
        return arrival_offsets(len(reqs), self.opts.rate or math.inf, self.opts.burstiness,
                               self.opts.seed)

    async def send_serial(self, path: RequestPath, info: PassInfo, reqs: list[dict],
                          phase: str) -> None:
        for req in reqs:
            await self.send(path, info, req, phase)

    async def send(self, path: RequestPath, info: PassInfo, req: dict, phase: str) -> None:
        """Build, send and record one request; failures become failed records."""
        salt = self.salt_for(req, info.salt_mode)
        modalities = [] if path.text_only else media_modalities(req)
        record: Record = {  # type: ignore[typeddict-unknown-key] - "pass"
            "schema_version": SCHEMA_VERSION, "run_id": self.run_id,
            "phase": phase, "pass": info.index, "path": path.name,
            "salt_mode": info.salt_mode, "salt_digest": salts.digest(salt),
            "request_id": req["id"], "case": req["case"], "tenant": req["tenant"],
            "modality": modality_label(modalities), "oracle": req["oracle"]["expect"],
            "segment": self.segment, "start_s": round(time.perf_counter() - self.t0, 6),
        }
        record.update(await self.exchange(path, tagged(req, info.tag), req["max_tokens"], salt))
        record["end_s"] = round(time.perf_counter() - self.t0, 6)
        self.seq += 1
        record["seq"] = self.seq  # the order in which requests finished
        self.writer.write(record)
        self.advance(1)

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
