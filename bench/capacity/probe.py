"""A capacity probe: one measured pass of the same workload at one request rate, counted
against the run's service-level objectives (:mod:`bench.goodput`).

Every probe sends the same workload (one seed), so that load is the only thing that differs
between probes: workloads of different seeds differ in what the caches are worth (on
``image``, prefix hit rates of 0.20 to 0.33 between seeds), which the first version of the
search mistook for load. Before each probe the server's prefix, multimodal and encoder
caches are reset (``VLLM_SERVER_DEV_MODE``, set on managed servers), and each probe is a
run of its own (its pass tags start every prompt), so every probe starts from empty caches.
Arrivals are open-loop (no concurrency cap: the server, not the client, must queue) at the
probe's rate; each probe is a saltbench run of its own under the search's directory.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from bench.engine.target import Target
from bench.errors import BenchError
from bench.outputs import new_run_id
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.workload import open_workload

#: The server's cache resets (development mode), every cache a probe could find filled.
RESETS = ("/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache")


def reset_caches(target: Target) -> None:
    """Empty every cache of every server behind ``target``; a BenchError naming the server
    and route when one refuses (a running server needs ``VLLM_SERVER_DEV_MODE=1``)."""
    for url in target.servers.values():
        for route in RESETS:
            request = urllib.request.Request(f"{url}{route}", data=b"", method="POST",
                                             headers=target.headers)
            try:
                urllib.request.urlopen(request, timeout=60).close()
            except (urllib.error.URLError, OSError) as exc:
                raise BenchError(f"{url}{route}: {exc}; a capacity probe starts from empty "
                                 "caches (start the server with VLLM_SERVER_DEV_MODE=1)"
                                 ) from None


class Prober:
    """``measure(rate, requests) -> (sent, good)`` for :func:`bench.capacity.search.search`
    (``opts``: one path, one salt mode and objectives), logging each probe's directory,
    prefix-cache hit rate and median TTFT."""

    def __init__(self, target: Target, spec: str, opts: RunOptions, out: Path, label: str,
                 console: Console, seed: int = 0) -> None:
        if not opts.goodput:
            raise BenchError("a capacity search needs objectives (--goodput KEY:MS ...)")
        if len(opts.paths) != 1 or len(opts.salt_modes) != 1:
            raise BenchError("a capacity probe measures one path and one salt mode at a time")
        self.target, self.spec, self.out, self.label, self.console = (
            target, spec, out, label, console)
        self.opts = replace(opts, max_concurrency=None, repeat=1)
        self.seed = seed
        self.log: list[dict] = []

    def __call__(self, rate: float, requests: int) -> tuple[int, int]:
        index = len(self.log)
        reset_caches(self.target)
        workload = open_workload(self.spec, seed=self.seed, requests=requests)
        where = self.out / f"probe-{index:02d}"
        # A run id of its own (its random end tags the prompts: no probe shares a prefix
        # with another probe, of this search or another, on the same server).
        results = run_benchmark(self.target, workload, replace(self.opts, rate=rate), where,
                                new_run_id(f"{self.label}-p{index:02d}"), self.console)
        if results["interrupted"] or results["stopped"]:
            raise BenchError(f"capacity probe {index} at {rate:g} requests/s did not finish "
                             f"({results['stopped'] or 'interrupted'}); its run: {where}")
        (summary,) = results["passes"]
        self.log.append({"rate": rate, "dir": where.name, "hit_rate": summary["hit_rate"],
                         "median_ttft_ms": summary["median_ttft_ms"],
                         "request_throughput": summary["request_throughput"]})
        return summary["completed"] + summary["failed"], summary["good_requests"]
