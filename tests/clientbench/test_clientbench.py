"""clientbench's prompts for its peers (the measured session: ``test_clientbench_engine``)."""

from __future__ import annotations

from bench.clientbench.session import REFERENCE, prompts_of, summarize
from bench.workload import open_workload


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
