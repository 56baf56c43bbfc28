"""Every path x modality x salt mode on the real engine: cached tokens as expected,
complete records and results, request and counter hit rates that agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from bench.engine.target import Target
from bench.measured.records import read_records
from bench.outputs import new_run_id
from bench.paths import PATHS
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.vocab import SALT_MODES

RECORD_FIELDS = {"schema_version", "run_id", "seq", "phase", "pass", "path", "salt_mode",
                 "salt_digest", "request_id", "case", "tenant", "modality", "oracle",
                 "start_s", "end_s", "ok", "status", "error", "prompt_tokens", "cached_tokens",
                 "output_tokens", "build_ms", "ttft_ms", "ttft_incl_preprocess_ms", "e2el_ms",
                 "itl_ms", "itl_token_ms"}
VLLM_KEYS = {"completed", "failed", "request_throughput", "output_throughput",
             "total_token_throughput"} | {f"{s}_{m}_ms" for s in
                                          ("mean", "median", "std", "p50", "p90", "p99")
                                          for m in ("ttft", "tpot", "itl", "e2el")}
CACHE_KEYS = {"hit_rate_requests", "hit_rate_counters", "counters_agree", "hit_count",
              "miss_count", "p50_ttft_hit_ms", "p99_ttft_hit_ms", "p50_ttft_miss_ms",
              "p99_ttft_miss_ms"}


@pytest.fixture(scope="module", params=["image", "audio", "video"])
def run(request, target: Target, modality_workloads: dict, tmp_path_factory) -> tuple:
    workload = modality_workloads[request.param]
    out: Path = tmp_path_factory.mktemp(f"run-{request.param}")
    opts = RunOptions(paths=list(PATHS), warmup=1, prime=True)
    results = run_benchmark(target, workload, opts, out, new_run_id(request.param),
                            Console(stderr=True))
    return request.param, results, read_records(out / "records.jsonl")


def test_every_request_succeeds_and_meets_its_cache_expectation(run: tuple) -> None:
    modality, results, records = run
    assert all(r["ok"] for r in records), [r["error"] for r in records if not r["ok"]]
    counts = results["judgements"]["counts"]
    # Served serially: every request of the prime and measure phases is judged exactly,
    # except where blocks an earlier request's output filled might match (not recorded).
    assert counts["judged"] == counts["met"] > 0, results["judgements"]
    assert counts["judged"] + counts["unjudged_output_blocks"] == counts["requests"]
    # Both kinds of judgement happened on every path: first sightings while priming,
    # full repeats while measuring.
    judged = {(g["path"], g["salt_mode"]) for g in results["judgements"]["groups"]}
    assert judged == {(p, s) for p in PATHS for s in SALT_MODES}
    first = [r for r in records if r["phase"] == "prime" and r["salt_mode"] == "salted"]
    assert {r["cached_tokens"] for r in first if r["oracle"] == "none"} == {0}
    for path in PATHS:  # primed: the measured repeats hit on every path
        assert any(r["cached_tokens"] for r in records
                   if r["path"] == path and r["phase"] == "measure"), (modality, path)


def test_salted_and_unsalted_passes_cover_every_path(run: tuple) -> None:
    _, results, records = run
    passes = {(p["path"], p["salt_mode"]) for p in results["passes"]}
    assert passes == {(p, s) for p in PATHS for s in SALT_MODES}
    salted = [r for r in records if r["salt_mode"] == "salted"]
    assert salted and all(r["salt_digest"] for r in salted)
    assert all(r["salt_digest"] is None for r in records if r["salt_mode"] == "none")


def test_records_and_results_have_every_field(run: tuple) -> None:
    modality, results, records = run
    for r in records:
        assert RECORD_FIELDS <= r.keys(), RECORD_FIELDS - r.keys()
    for p in results["passes"]:
        assert VLLM_KEYS | CACHE_KEYS <= p.keys()
        assert p["completed"] > 0 and p["failed"] == 0
    measured_modalities = {g["modality"] for g in results["groups"]}
    assert measured_modalities == {modality, "text"}  # text: generate-tokens' text-only form
    meta = results["metadata"]
    assert meta["target"]["vllm_version"] and meta["target"]["block_size"] == 32
    assert meta["workload"]["spec"]["sha256"] and meta["machine"]["cpu"]


def test_request_and_counter_hit_rates_agree(run: tuple) -> None:
    _, results, _ = run
    for p in results["passes"]:
        assert p["counters_agree"] is True, p
        assert p["hit_rate_requests"] == pytest.approx(p["hit_rate_counters"])


def test_workload_oracle_agrees_with_what_was_sent(run: tuple) -> None:
    _, results, _ = run
    assert results["oracle"]["compared"] > 0
    assert results["oracle"]["disagreements"] == []


def test_multimodal_paths_see_the_same_prompt_token_count(run: tuple) -> None:
    _, results, _ = run
    assert results["prompt_token_mismatches"] == []


def test_file_urls_reach_the_managed_server(target: Target, tmp_path: Path) -> None:
    """``--media-url file``: media under the server's allowed path, sent as file:// URLs."""
    if target.media_dir is None:
        pytest.skip("an external server: its allowed media path is unknown")
    from bench.workload import generate, load_workload

    workload = load_workload(generate("smoke"))  # the default cache dir, under media_dir
    opts = RunOptions(paths=["chat", "generate-parts"], salt_modes=["salted"], warmup=0,
                      media_url="file", prime=True)
    results = run_benchmark(target, workload, opts, tmp_path, new_run_id("file"),
                            Console(stderr=True))
    records = read_records(tmp_path / "records.jsonl")
    assert records and all(r["ok"] for r in records), [r["error"] for r in records]
    counts = results["judgements"]["counts"]
    assert counts["met"] == counts["judged"]
    assert counts["judged"] + counts["unjudged_output_blocks"] == counts["requests"]
