"""saltbench's goodput, throughput and latency summaries against ``calculate_metrics`` of
``vllm bench serve`` (run by the engine environment's interpreter; vLLM is not importable
from ``.venv``) on the same requests: failures, one-token requests and TTFTs and E2ELs exactly
at their objective included. TPOT is derived (vLLM from seconds, saltbench from
milliseconds), so its objective is one no request's TPOT can equal: a value exactly at it
may round to either side."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from bench.engine.provision import provision
from bench.engine.spec import default_engine_spec
from bench.metrics import aggregate

VLLM_SIDE = """
import json, sys
from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput
from vllm.benchmarks.serve import calculate_metrics
doc = json.load(sys.stdin)
outputs = [RequestFuncOutput(success=r["ok"], latency=(r["e2el_ms"] or 0) / 1000,
                             ttft=(r["ttft_ms"] or 0) / 1000, output_tokens=r["output_tokens"] or 0,
                             itl=[x / 1000 for x in r["itl_ms"]], prompt_len=r["prompt_tokens"] or 0,
                             start_time=i * 0.01, error="" if r["ok"] else "failed")
           for i, r in enumerate(doc["records"])]
out = {}
for name, slos in doc["slos"].items():
    metrics, _ = calculate_metrics([], outputs, doc["duration_s"], None, [99], slos)
    out[name] = {k: getattr(metrics, k) for k in (
        "completed", "request_goodput", "request_throughput", "mean_ttft_ms", "median_ttft_ms",
        "mean_tpot_ms", "mean_e2el_ms", "total_output")}
print(json.dumps(out))
"""

#: 7.3 ms: gaps are even, so an average over at most 15 of them never equals it.
SLOS = {"ttft": {"ttft": 60.0}, "tpot": {"tpot": 7.3}, "zero": {"tpot": 0.0},
        "all": {"ttft": 60.0, "tpot": 7.3, "e2el": 150.0}}


def _records(n: int = 200) -> list[dict]:
    rng = random.Random(7)
    records = []
    for i in range(n):
        if i % 17 == 0:
            records.append({"ok": False, "ttft_ms": None, "e2el_ms": None, "output_tokens": None,
                            "itl_ms": [], "prompt_tokens": None})
            continue
        out = 1 if i % 11 == 0 else rng.randint(2, 16)
        ttft = 60.0 if i % 13 == 0 else rng.choice([20.0, 40.0, 55.0, 80.0, 120.0])
        gaps = [rng.choice([4.0, 6.0, 8.0, 12.0]) for _ in range(out - 1)]
        if i % 19 == 0:  # an E2EL exactly at its objective
            ttft, gaps = 60.0, [6.0] * 15
            out = 16
        records.append({"ok": True, "ttft_ms": ttft, "e2el_ms": ttft + sum(gaps),
                        "output_tokens": out, "itl_ms": gaps, "prompt_tokens": 100})
    return records


@pytest.fixture(scope="module")
def engine_python():
    return provision(default_engine_spec()).python


def test_goodput_and_summaries_match_vllm_bench_serve(engine_python):
    records, duration = _records(), 12.5
    proc = subprocess.run([str(engine_python), "-c", VLLM_SIDE], input=json.dumps(
        {"records": records, "duration_s": duration, "slos": SLOS}), capture_output=True,
        text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, slos in SLOS.items():
        mine = aggregate(records, duration, slos)
        vllm = theirs[name]
        assert mine["completed"] == vllm["completed"]
        assert mine["total_output_tokens"] == vllm["total_output"]
        assert 0 < mine["request_goodput"] < mine["request_throughput"]
        for key in ("request_goodput", "request_throughput", "mean_ttft_ms", "median_ttft_ms",
                    "mean_tpot_ms", "mean_e2el_ms"):
            assert mine[key] == pytest.approx(vllm[key], rel=1e-9), (name, key)
