"""clientbench at a small size: saltbench, the loopback ceiling and (with the engine
environment) vllm bench serve, on text and image prompts, against the zero-work server.
Timings are benchmark output, never asserted: only that every client measured what it
was given and that the outputs are complete."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from bench.clientbench import report
from bench.clientbench.session import REFERENCE, Plan, prompts_of, run_clientbench, summarize
from bench.peers.vllm_bench import VllmBench
from bench.workload import open_workload


def test_clientbench_measures_every_client_on_the_same_prompts(tmp_path: Path) -> None:
    clients = ["saltbench", "loopback"] + (["vllm-bench"] if VllmBench.find() else [])
    plan = Plan(clients=clients, concurrencies=[4], requests=40, repeat=1)
    doc = run_clientbench(plan, tmp_path, Console(stderr=True))
    assert not doc["interrupted"]
    assert not [r for r in doc["rows"] if "error" in r], doc["rows"]
    assert len(doc["rows"]) == len(clients) * 2
    for row in doc["rows"]:
        assert row["completed"] == 40 and row["failed"] == 0, row
        assert row["client_cpu_s"] > 0 and row["client_peak_rss_mb"] > 0
    if "vllm-bench" in clients:
        ratios = [e["request_throughput_ratio"] for e in doc["summary"]
                  if e["client"] != REFERENCE]
        assert all(r and r["low"] <= r["ratio"] <= r["high"] for r in ratios)
    paths = report.write(doc, tmp_path)
    assert all(p.stat().st_size for p in paths)
    assert json.loads((tmp_path / "clientbench.json").read_text())["rows"] == doc["rows"]
    print(report.markdown(doc))


def test_peers_get_saltbench_s_prompts() -> None:
    workload = open_workload("clientbench-image", requests=3)
    prompts = prompts_of(workload)
    assert len(prompts) == 3 and all(p.image_url.startswith("data:image/png;base64,")
                                     for p in prompts)
    first = next(workload.requests())
    assert first["messages"][-1]["content"][0]["text"].strip() in prompts[0].text


def test_the_summary_says_when_a_ratio_cannot_be_told() -> None:
    rows = [{"client": c, "prompts": "text", "load": "concurrency", "value": 1, "repetition": i,
             "request_throughput": v, "ttft_p50_ms": 1.0, "ttft_p99_ms": 2.0, "itl_p50_ms": None,
             "itl_p99_ms": None, "client_cpu_s": 1.0, "client_peak_rss_mb": 10.0,
             "server_cpu_share": 0.5}
            for c, values in (("saltbench", (200.0, 220.0)), (REFERENCE, (100.0, 100.0)))
            for i, v in enumerate(values)]
    (mine,) = [e for e in summarize(rows) if e["client"] == "saltbench"]
    assert mine["request_throughput_ratio"]["ratio"] == 2.1
    assert 2.0 <= mine["request_throughput_ratio"]["low"] <= 2.1 <= mine[
        "request_throughput_ratio"]["high"] <= 2.2
    assert mine["itl_p50_ms"] is None and mine["itl_p50_ms_ratio"] is None
