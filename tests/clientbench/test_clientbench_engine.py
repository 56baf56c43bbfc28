"""clientbench at a small size: saltbench, the loopback ceiling and vllm bench serve (the
engine environment's), on text and image prompts, against the zero-work server. Timings are
benchmark output, never asserted: only that every client measured what it was given and
that the outputs are complete."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from bench.clientbench import report
from bench.clientbench.session import REFERENCE, Plan, run_clientbench
from bench.peers.vllm_bench import VllmBench


def test_clientbench_measures_every_client_on_the_same_prompts(tmp_path: Path) -> None:
    VllmBench.provision()  # the engine environment (an engine test: provisioned in the background)
    clients = ["saltbench", "loopback", "vllm-bench"]
    plan = Plan(clients=clients, concurrencies=[4], requests=40, repeat=1)
    doc = run_clientbench(plan, tmp_path, Console(stderr=True))
    assert not doc["interrupted"]
    assert not [r for r in doc["rows"] if "error" in r], doc["rows"]
    assert len(doc["rows"]) == len(clients) * 2
    for row in doc["rows"]:
        assert row["completed"] == 40 and row["failed"] == 0, row
        assert row["client_cpu_s"] > 0 and row["client_peak_rss_mb"] > 0
    ratios = [e["request_throughput_ratio"] for e in doc["summary"] if e["client"] != REFERENCE]
    assert all(r and r["low"] <= r["ratio"] <= r["high"] for r in ratios)
    paths = report.write(doc, tmp_path)
    assert all(p.stat().st_size for p in paths)
    assert json.loads((tmp_path / "clientbench.json").read_text())["rows"] == doc["rows"]
    print(report.markdown(doc))
