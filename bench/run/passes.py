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

import math
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from rich.progress import Progress

from bench import SCHEMA_VERSION, salts
from bench.client.loadshape import arrival_offsets, dispatch
from bench.engine.target import Target
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
from bench.run.exchange import exchange
from bench.run.layouts import render_layouts
from bench.run.records import PassInfo, Record, RecordWriter
from bench.vocab import SALT_MODES
from bench.workload import Workload


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
    timeout_s: float = 600.0
    media_url: str = "data"
    audio_part: str = "audio_url"
    seed: int = 0
    repeat: int = 1
    #: Test-only: paths whose builder drops the salt (proves that a leak is caught).
    drop_salt_on: tuple[str, ...] = ()


def pass_order(paths: list[RequestPath], salt_modes: list[str],
               repetition: int) -> list[tuple[RequestPath, str]]:
    """The (path, salt mode) passes of one repetition: odd repetitions run them in reverse
    (A B .. B A), so that a slow drift of the machine weighs on every pass alike."""
    order = [(path, mode) for path in paths for mode in salt_modes]
    return order[::-1] if repetition % 2 else order


class Runner:
    """Runs passes and writes ``records.jsonl`` as requests finish, ``layouts.jsonl`` after
    each pass."""

    def __init__(self, target: Target, workload: Workload, opts: RunOptions,
                 records_path: Path, layouts_path: Path, run_id: str,
                 progress: Progress | None = None) -> None:
        self.target, self.workload, self.opts = target, workload, opts
        self.records_path, self.layouts_path = records_path, layouts_path
        self.run_id, self.progress = run_id, progress
        self.secret = secrets.token_hex(16)  # raw salts are derived from it, never stored
        self.passes: list[PassInfo] = []
        self.seq = 0
        self.t0 = time.perf_counter()

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
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        with RecordWriter(self.records_path) as writer, \
                RecordWriter(self.layouts_path) as layouts:
            async with aiohttp.ClientSession(connector=connector) as session:
                self.session, self.writer = session, writer
                for repetition in range(self.opts.repeat):
                    for path, salt_mode in pass_order(paths, self.opts.salt_modes, repetition):
                        info = PassInfo(len(self.passes), path.name, salt_mode,
                                        f"{self.run_id[-6:]}{len(self.passes):04d}", repetition)
                        self.passes.append(info)
                        await self.run_pass(path, info, reqs)
                        await self.write_layouts(path, info, reqs, layouts)
        return self.passes

    async def run_pass(self, path: RequestPath, info: PassInfo, reqs: list[dict]) -> None:
        if self.opts.warmup:
            warm = PassInfo(info.index, info.path, info.salt_mode, info.tag + "w", info.repetition)
            await self.send_serial(path, warm, reqs[: self.opts.warmup], "warmup")
        if self.opts.prime:
            await self.send_serial(path, info, reqs, "prime")
        before = await counters.settled_scrape(self.session, self.target.base_url)
        offsets = self.offsets(reqs)
        start = time.perf_counter()
        await dispatch(reqs, offsets, self.opts.max_concurrency,
                       lambda req: self.send(path, info, req, "measure"))
        info.duration_s = time.perf_counter() - start
        after = await counters.settled_scrape(self.session, self.target.base_url)
        info.counters = counters.delta(before, after)

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
            "start_s": round(time.perf_counter() - self.t0, 6),
        }
        record.update(await exchange(self.session, path, tagged(req, info.tag),
                                     req["max_tokens"], salt, self.opts.timeout_s))
        record["end_s"] = round(time.perf_counter() - self.t0, 6)
        self.seq += 1
        record["seq"] = self.seq  # the order in which requests finished
        self.writer.write(record)
        if self.progress is not None:
            self.progress.advance(self.progress.task_ids[0])
