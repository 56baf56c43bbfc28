"""The whole isolation run: verdict cells, uuid probe, side channels -> isolation.json."""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import aiohttp
from rich.console import Console

from bench import SCHEMA_VERSION, aio
from bench.cachedirs import cache_dir
from bench.client.connections import streaming
from bench.docio import write_json
from bench.engine.target import Target
from bench.isolation.cells import run_cell
from bench.isolation.probe import prompt
from bench.isolation.probe_media import probe_media
from bench.isolation.replicas import replica_experiments, replica_paths, replica_steps
from bench.isolation.side_channel import add_tests, measure
from bench.isolation.uuid_probe import run_uuid_probe
from bench.metadata import base_metadata
from bench.outputs import ISOLATION_FILE, ISOLATION_KIND
from bench.paths import PATHS, make_paths, media_paths, unavailable_paths, uuid_paths
from bench.paths.base import PathContext, RequestPath
from bench.paths.media_urls import MediaUrls
from bench.progress import progress_bar
from bench.run.exchange import exchange
from bench.stats import POWER_TARGET, samples_for_power
from bench.verdicts.boundary import boundary_rows, exit_code
from bench.vocab import DEFAULT_FAIL_ON, MEDIA_MODALITIES, MODALITIES, NOT_AVAILABLE, PER_TENANT


@dataclass
class IsolationOptions:
    paths: list[str] = field(default_factory=lambda: list(PATHS))
    modalities: list[str] = field(default_factory=lambda: list(MODALITIES))
    #: Side-channel sample pairs per row; 0 skips the side channel; None: enough for
    #: :data:`POWER_TARGET` across this run's cross-tenant rows (:func:`resolve_samples`).
    samples: int | None = None
    #: Seeds the order of each side-channel sample's seen and unseen probes.
    order_seed: int = 0
    uuid_probe: bool = True
    #: The boundary channels whose finding fails the run (bench.verdicts.boundary).
    fail_on: tuple[str, ...] = DEFAULT_FAIL_ON
    #: How the uuid probe and side channel send media uuids (bench.vocab.CLIENT_UUIDS).
    client_uuids: str = "as-sent"
    timeout_s: float = 600.0
    #: Test-only: paths whose builder drops the salt (proves that a leak is caught).
    drop_salt_on: tuple[str, ...] = ()


def cells_of(opts: IsolationOptions) -> list[tuple[str, str]]:
    """(path, modality) cells: token-only paths carry text prompts only."""
    return [(p, m) for p in opts.paths for m in opts.modalities
            if m == "text" or not PATHS[p].text_only]


def uuid_cells(opts: IsolationOptions) -> list[tuple[str, str]]:
    """(path, modality) cells of the uuid probe: uuid paths x media modalities."""
    if not opts.uuid_probe:
        return []
    return [(p, m) for p in uuid_paths() if p in opts.paths
            for m in opts.modalities if m in MEDIA_MODALITIES]


def side_channel_cells(opts: IsolationOptions) -> list[tuple[str, str]]:
    """(path, modality) cells of the side channel: media paths x media modalities."""
    return [(p, m) for p in media_paths() if p in opts.paths
            for m in opts.modalities if m in MEDIA_MODALITIES]


def resolve_samples(opts: IsolationOptions,
                    servers: int = 1) -> tuple[IsolationOptions, dict | None]:
    """``opts`` with its sample count settled, and the power target it was derived from
    (``None`` when the count was given); ``servers``: the vLLM servers probed (replicas)."""
    if opts.samples is not None:
        return opts, None
    # The tested family: one cross-tenant row per cell and server.
    rows = len(side_channel_cells(opts)) * servers
    if not rows:
        return replace(opts, samples=0), None
    target = {**POWER_TARGET, "tests": rows}
    return replace(opts, samples=samples_for_power(**target)), target


class _Media:
    """Fresh probe media, registered in the context's media index as they are made."""

    def __init__(self, ctx: PathContext, root: Path) -> None:
        self.ctx, self.root, self.count = ctx, root, 0

    def fresh(self, modality: str, purpose: str, other_size: bool = False) -> str:
        item = probe_media(modality, f"{modality}-{purpose}-{self.count:05d}", self.root,
                           other_size)
        self.count += 1
        self.ctx.media[item.id] = item
        return item.id


async def run_isolation(target: Target, opts: IsolationOptions, run_id: str,
                        out_path: Path, metadata: dict, progress=None) -> dict:
    """Run everything; ``isolation.json`` is rewritten after each cell (partial results;
    side-channel rows get their statistics once all are measured)."""
    unavailable = unavailable_paths(opts.paths, target.metadata)
    not_served = cells_of(replace(opts, paths=list(unavailable)))
    opts = replace(opts, paths=[p for p in opts.paths if p not in unavailable])
    opts, power_target = resolve_samples(opts, len(target.servers))
    # Behind a router, the cells ask the first replica directly (bench.isolation.replicas
    # covers the others and the router); the uuid probe and side channel ask every replica.
    direct = target.replicas[0].url if target.replicas else target.base_url
    ctx = PathContext(direct, target.model, {}, MediaUrls("data"),
                      timeout_s=opts.timeout_s, zero_cached_omitted=target.zero_cached_omitted)
    media = _Media(ctx, cache_dir("probe-media") / run_id)
    paths = {p.name: p for p in make_paths(opts.paths, ctx, opts.drop_salt_on)}
    result = {"schema_version": SCHEMA_VERSION, "kind": ISOLATION_KIND, "run_id": run_id,
              "metadata": {**metadata, "isolation_options": {
                  **opts.__dict__, "samples_power_target": power_target,
                  "uuid_paths": [p for p in uuid_paths() if p in opts.paths]}},
              "cells": [{"path": p, "modality": m, "verdict": NOT_AVAILABLE, "leaked_tokens": 0,
                         "reason": unavailable[p], "steps": []} for p, m in not_served],
              "routed": [], "uuid_probe": [], "side_channel": [], "duration_s": None,
              "complete": False}
    start = time.monotonic()

    def save() -> None:
        result["duration_s"] = round(time.monotonic() - start, 1)
        write_json(out_path, result)

    def tick() -> None:
        save()
        if progress is not None:
            progress.advance(progress.task_ids[0])

    try:
        await _experiments(target, opts, ctx, media, paths, result, tick)
    finally:
        shutil.rmtree(media.root, ignore_errors=True)
    add_tests(result["side_channel"])
    result.update(complete=True, boundary=boundary_rows(result), exit_code=exit_code(result))
    save()
    return result


async def _experiments(target: Target, opts: IsolationOptions, ctx: PathContext,
                       media: _Media, paths: dict[str, RequestPath], result: dict,
                       tick: Callable[[], None]) -> None:
    async with aiohttp.ClientSession(headers=target.headers) as session, \
            streaming(target.headers):
        for name, modality in cells_of(opts):
            media_id = None if modality == "text" else media.fresh(modality, "cell")
            await _warm(session, paths[name], modality, media, opts.timeout_s)
            cell = await run_cell(session, ctx.base_url, paths[name], modality, media_id,
                                  target.block_size, opts.timeout_s)
            result["cells"].append({**cell, "replica": target.replicas[0].name}
                                   if target.replicas else cell)
            tick()
        if target.replicas:
            await replica_experiments(
                session, target, ctx, cells_of(opts), opts.drop_salt_on,
                lambda m: None if m == "text" else media.fresh(m, "cell"),
                lambda path, m: _warm(session, path, m, media, opts.timeout_s), result, tick)
        per_tenant, rng = opts.client_uuids == PER_TENANT, random.Random(opts.order_seed)
        for replica, url in target.servers.items():
            at = {"replica": replica} if replica else {}
            on = paths if url == ctx.base_url else replica_paths(
                ctx, url, list(paths), opts.drop_salt_on)
            for name, modality in uuid_cells(opts):
                result["uuid_probe"].append({**await run_uuid_probe(
                    session, url, on[name], modality,
                    media.fresh(modality, "uuid-x", other_size=True),
                    media.fresh(modality, "uuid-y"), target.block_size, opts.timeout_s,
                    per_tenant), **at})
                tick()
            for name, modality in side_channel_cells(opts) if opts.samples else ():
                ids = [media.fresh(modality, "side") for _ in range(3 * opts.samples)]
                result["side_channel"] += [{**row, **at} for row in await measure(
                    session, on[name], modality, ids, opts.samples, opts.timeout_s, rng,
                    per_tenant)]
                tick()


async def _warm(session: aiohttp.ClientSession, path: RequestPath, modality: str, media: _Media,
                timeout_s: float) -> None:
    """Two untimed, unjudged requests so that compilation does not land in a cell."""
    for _ in range(2):
        media_id = None if modality == "text" else media.fresh(modality, "warm")
        await exchange(session, path, prompt(modality, media_id), 2, None, timeout_s)


def total_steps(opts: IsolationOptions, servers: int = 1) -> int:
    """How many progress ticks ``run_isolation`` makes on ``servers`` vLLM servers (beside
    :func:`bench.isolation.replicas.replica_steps`)."""
    probed = len(uuid_cells(opts)) + (len(side_channel_cells(opts)) if opts.samples != 0 else 0)
    return len(cells_of(opts)) + probed * servers


def isolate(target: Target, opts: IsolationOptions, out_dir: Path, run_id: str,
            console: Console) -> dict:
    """Run the isolation experiment against ``target``; write ``out_dir/isolation.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    total = (total_steps(opts, len(target.servers))
             + replica_steps(target, len(cells_of(opts))))
    with progress_bar(console, "isolation", total) as progress:
        return aio.run(run_isolation(target, opts, run_id, out_dir / ISOLATION_FILE,
                                         {**base_metadata(), "target": target.metadata},
                                         progress))

