"""A capacity probe: one measured pass of a fresh workload at one request rate, counted
against the run's service-level objectives (:mod:`bench.goodput`).

Each probe is a run of its own (its pass tags, from its run id, start every prompt: no
probe shares a prefix with another) of a workload generated with its own seed (``seed``
plus the probe's index; media differ where the spec draws them), so every probe starts
from the same prefix-cache state: none of its own requests cached. Arrivals are open-loop (no
concurrency cap: the server, not the client, must queue) at the probe's rate; each probe
is a saltbench run of its own under the search's directory.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.console import Console

from bench.engine.target import Target
from bench.errors import BenchError
from bench.outputs import new_run_id
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.workload import open_workload


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
        workload = open_workload(self.spec, seed=self.seed + index, requests=requests)
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
