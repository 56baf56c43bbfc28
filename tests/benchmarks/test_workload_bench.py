"""Workload generation throughput: requests/s, media synthesis MB/s and peak memory.

No timing asserts: figures go to ``benchmark.extra_info``.
"""

from __future__ import annotations

import itertools
import shutil
import threading
import tracemalloc
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from bench.workload.build import write_workload
from bench.workload.spec import load


class PeakRss:
    """Samples this process's RSS in a thread; ``peak_mb`` is the rise above the start."""

    def __init__(self, interval_s: float = 0.01):
        self.interval_s, self.proc = interval_s, psutil.Process()
        self.start = self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def peak_mb(self) -> float:
        return (self.peak - self.start) / 1e6


def _bench(benchmark, tmp_path: Path, requests: int, rounds: int) -> None:
    spec = replace(load("mixed-tenants"), requests=requests)
    dirs = (tmp_path / f"wl{i}" for i in itertools.count())
    runs = []

    def once():
        out = next(dirs)
        with PeakRss() as rss:
            stats = write_workload(spec, out)
        runs.append((stats, rss.peak_mb))
        shutil.rmtree(out)

    benchmark.pedantic(once, rounds=rounds, iterations=1)
    stats, peak_mb = min(runs, key=lambda r: r[0].seconds)
    assert stats.requests == requests
    benchmark.extra_info.update({
        "requests": requests,
        "requests_per_s": round(requests / stats.seconds, 1),
        "media_files": stats.media_files,
        "media_MB": round(stats.media_bytes / 1e6, 2),
        "media_MB_per_s": round(stats.media_bytes / 1e6 / stats.media_seconds, 2),
        "media_share_of_time": round(stats.media_seconds / stats.seconds, 3),
        "peak_rss_delta_MB": round(max(r[1] for r in runs), 1),
        "tracemalloc_peak_MB": round(_traced_peak_mb(spec, tmp_path / "traced"), 1),
    })


def _traced_peak_mb(spec, out: Path) -> float:
    """Peak Python/numpy heap of one untimed generation (tracemalloc slows it down)."""
    tracemalloc.start()
    try:
        write_workload(spec, out)
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
        shutil.rmtree(out)


def test_generate_mixed_tenants_1k(benchmark, tmp_path) -> None:
    _bench(benchmark, tmp_path, 1_000, rounds=3)


@pytest.mark.slow
def test_generate_mixed_tenants_10k(benchmark, tmp_path) -> None:
    _bench(benchmark, tmp_path, 10_000, rounds=1)
