"""clientbench: every client on the same prompts against one zero-work server, in one run.

For each prompt kind (text, image), load (a concurrency, or a request rate) and repetition
(clients in alternating order: A B .. B A), each client runs as its own process
(:class:`bench.peers.base.Driver`), and the server's CPU share during the run is kept
(near 1.0 the server, not the client, was the limit). Rows are written to
``clientbench.json`` as they come, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import datetime as dt
import math
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import psutil
from rich.console import Console

from bench import SCHEMA_VERSION
from bench.clientbench.drivers import Loopback, Saltbench
from bench.docio import write_json
from bench.errors import BenchError
from bench.metadata import base_metadata
from bench.paths.media_urls import MediaUrls
from bench.peers import DRIVERS
from bench.peers.base import Driver, PeerRun, Prompt
from bench.workload import Workload, open_workload
from bench.zerowork import ZeroWorkServer

KIND = "saltbench-clientbench"
FILE = "clientbench.json"
#: Every client, saltbench first; ratios are to ``REFERENCE``.
CLIENTS = ("saltbench", "loopback", *DRIVERS)
REFERENCE = "vllm-bench"
PROMPT_KINDS = ("text", "image")
#: The throughputs and latencies compared (ToolMetrics fields).
METRICS = ("request_throughput", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")


@dataclass
class Plan:
    """What to measure."""

    clients: list[str] = field(default_factory=lambda: list(CLIENTS))
    prompts: list[str] = field(default_factory=lambda: list(PROMPT_KINDS))
    concurrencies: list[int] = field(default_factory=lambda: [1, 16, 64, 256])
    rates: list[float] = field(default_factory=list)
    requests: int = 1000
    repeat: int = 3
    output_tokens: int = 16
    workers: int = 1


def prompts_of(workload: Workload) -> tuple[Prompt, ...]:
    """The workload's requests as single-message prompts (its texts joined, its one image as
    a data URL): what saltbench sends, for the peers."""
    urls = MediaUrls("data")
    prompts = []
    for req in workload.requests():
        texts, image = [], None
        for message in req["messages"]:
            for part in message["content"]:
                if part["type"] == "text":
                    texts.append(part["text"])
                else:
                    item = workload.media[part["media"]]
                    image = urls.url(item.path, item.mime)
        prompts.append(Prompt(" ".join(t.strip() for t in texts), image))
    return tuple(prompts)


def drivers(plan: Plan, workloads: dict[str, Workload], console: Console) -> dict[str, object]:
    """Per client name: a factory ``kind -> Driver``, or why it is skipped (a string)."""
    out: dict[str, object] = {}
    for name in plan.clients:
        if name == "saltbench":
            out[name] = lambda kind: Saltbench(workloads[kind].dir, plan.workers)
        elif name == "loopback":
            out[name] = lambda kind: Loopback()
        elif (found := DRIVERS[name].find()) is None:
            out[name] = f"not provisioned (run_bench.py clientbench --provision {name})"
            console.print(f"[yellow]{name}: {out[name]}[/]")
        else:
            out[name] = lambda kind, d=found: d
    return out


def _loads(plan: Plan) -> list[tuple[str, float]]:
    return [("concurrency", c) for c in plan.concurrencies] + [("rate", r) for r in plan.rates]


def run_clientbench(plan: Plan, out_dir: Path, console: Console) -> dict:
    """Measure; write ``clientbench.json`` (rows and summary) and return it."""
    if plan.requests < 1 or plan.repeat < 1:
        raise BenchError("clientbench: --requests and --repeat must be >= 1")
    workloads = {k: open_workload(f"clientbench-{k}", requests=plan.requests)
                 for k in plan.prompts}
    factories = drivers(plan, workloads, console)
    doc = {"schema_version": SCHEMA_VERSION, "kind": KIND,
           "metadata": {**base_metadata(), "plan": asdict(plan),
                        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")},
           "skipped": {n: f for n, f in factories.items() if isinstance(f, str)},
           "rows": [], "summary": [], "interrupted": True}
    runnable = [n for n in plan.clients if not isinstance(factories[n], str)]
    with ZeroWorkServer(output_tokens=plan.output_tokens) as server:
        doc["metadata"]["server"] = {"command": server.command}
        process = psutil.Process(server.proc.pid)
        try:
            for kind in plan.prompts:
                prompts = prompts_of(workloads[kind])
                for load, value in _loads(plan):
                    for rep in range(plan.repeat):
                        for name in runnable if rep % 2 == 0 else runnable[::-1]:
                            driver: Driver = factories[name](kind)  # type: ignore[operator]
                            if load == "rate" and not driver.supports_rate:
                                continue
                            run = PeerRun(server.url, "zerowork", prompts, plan.output_tokens,
                                          concurrency=int(value) if load == "concurrency" else 256,
                                          requests=plan.requests,
                                          rate=value if load == "rate" else None)
                            doc["rows"].append(_measure(driver, run, process, out_dir, kind,
                                                        load, value, rep, console))
                            write_json(out_dir / FILE, doc)
            doc["interrupted"] = False
        finally:
            doc["summary"] = summarize(doc["rows"])
            write_json(out_dir / FILE, doc)
    return doc


def _measure(driver: Driver, run: PeerRun, server: psutil.Process, out_dir: Path, kind: str,
             load: str, value: float, rep: int, console: Console) -> dict:
    workdir = out_dir / "runs" / f"{kind}-{load}{value:g}-r{rep}-{driver.name}"
    shutil.rmtree(workdir, ignore_errors=True)
    row = {"client": driver.name, "prompts": kind, "load": load, "value": value,
           "repetition": rep}
    cpu_before = sum(server.cpu_times()[:2])
    try:
        result = driver.run(run, workdir)
    except BenchError as exc:
        console.print(f"[red]{driver.name} {kind} {load} {value:g}: {exc}[/]")
        return {**row, "error": str(exc)}
    server_cpu = sum(server.cpu_times()[:2]) - cpu_before
    m = result.metrics
    console.print(f"{kind:5} {load} {value:>5g} r{rep} {driver.name:15} "
                  f"{m.request_throughput:8.1f} req/s  TTFT p50 {_fmt(m.ttft_p50_ms)} ms  "
                  f"client CPU {result.cpu_s:.1f} s  server CPU share "
                  f"{server_cpu / m.duration_s:.2f}")
    return {**row, "version": result.version, **asdict(m), "client_cpu_s": result.cpu_s,
            "client_peak_rss_mb": result.peak_rss_mb, "wall_s": result.wall_s,
            "server_cpu_share": server_cpu / m.duration_s if m.duration_s else None,
            "command": result.command}


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def summarize(rows: list[dict], resamples: int = 2000, seed: int = 0) -> list[dict]:
    """Per prompt kind, load and client: each metric's mean over repetitions and, against
    :data:`REFERENCE`, the ratio of means with a 95% bootstrap interval over repetitions."""
    done = [r for r in rows if "error" not in r]
    keys = sorted({(r["prompts"], r["load"], r["value"]) for r in done},
                  key=lambda k: (PROMPT_KINDS.index(k[0]), k[1], k[2]))
    rng = np.random.default_rng(seed)
    out = []
    for kind, load, value in keys:
        here = [r for r in done if (r["prompts"], r["load"], r["value"]) == (kind, load, value)]
        reference = [r for r in here if r["client"] == REFERENCE]
        for client in CLIENTS:
            mine = [r for r in here if r["client"] == client]
            if not mine:
                continue
            entry = {"prompts": kind, "load": load, "value": value, "client": client,
                     "repetitions": len(mine),
                     "peak_rss_mb": max(r["client_peak_rss_mb"] for r in mine),
                     "client_cpu_s": float(np.mean([r["client_cpu_s"] for r in mine])),
                     "server_cpu_share": max(r["server_cpu_share"] or 0 for r in mine)}
            for metric in METRICS:
                values = _values(mine, metric)
                entry[metric] = float(values.mean()) if values.size else None
                if reference and client != REFERENCE:
                    entry[f"{metric}_ratio"] = _ratio(values, _values(reference, metric),
                                                      resamples, rng)
            out.append(entry)
    return out


def _values(rows: list[dict], metric: str) -> np.ndarray:
    return np.asarray([r[metric] for r in rows if r.get(metric) is not None], dtype=float)


def _ratio(mine: np.ndarray, reference: np.ndarray, resamples: int,
           rng: np.random.Generator) -> dict | None:
    """``mean(mine) / mean(reference)`` with the percentile interval of resampled repetitions."""
    if not mine.size or not reference.size or not reference.mean():
        return None
    a = rng.choice(mine, (resamples, mine.size)).mean(axis=1)
    b = rng.choice(reference, (resamples, reference.size)).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = a / b
    ratios = ratios[np.isfinite(ratios)]
    low, high = (np.percentile(ratios, [2.5, 97.5]) if ratios.size else (math.nan, math.nan))
    return {"ratio": float(mine.mean() / reference.mean()), "low": float(low),
            "high": float(high)}
