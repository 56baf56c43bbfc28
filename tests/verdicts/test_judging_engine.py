"""Every request of the shipped multi-tenant workloads judged on the real engine: met,
served one at a time and four at a time, and a dropped salt caught on image-only and
video-only requests too."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from bench.engine.target import Target
from bench.outputs import new_run_id
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.verdicts.runs import problems
from bench.workload import open_workload

PATHS = ["chat", "generate-parts"]


def _run(target: Target, spec: str, n: int, out: Path, **opts) -> dict:
    workload = open_workload(spec, requests=n)
    options = RunOptions(**{"paths": PATHS, "salt_modes": ["salted"], "warmup": 0, **opts})
    return run_benchmark(target, workload, options, out, new_run_id(spec), Console(stderr=True))


@pytest.mark.parametrize("spec, n", [("mixed-tenants", 60), ("multi-turn", 40)])
def test_every_salted_request_is_judged_and_met(target: Target, tmp_path: Path, spec: str,
                                                n: int) -> None:
    results = _run(target, spec, n, tmp_path)
    counts = results["judgements"]["counts"]
    # Served one at a time: no twin is ever in flight; only blocks an earlier turn's output
    # filled (their token ids are not recorded) can leave a request between its bounds.
    assert counts["requests"] == n * len(PATHS)
    assert counts["judged"] == counts["met"], results["judgements"]
    assert counts["judged"] + counts["unjudged_output_blocks"] == counts["requests"]
    groups = results["judgements"]["groups"]
    assert groups and all(g["leak"] == g["under-hit"] == g["no-layout"] == 0 for g in groups)
    assert all(p["counters_agree"] for p in results["passes"])
    assert results["oracle"]["compared"] > 0
    assert results["oracle"]["agreed"] == results["oracle"]["compared"], results["oracle"]


def test_a_dropped_salt_is_a_leak_on_image_and_video_requests(target: Target,
                                                              tmp_path: Path) -> None:
    results = _run(target, "mixed-tenants", 60, tmp_path, drop_salt_on=("chat",))
    groups = {(g["path"], g["modality"]): g for g in results["judgements"]["groups"]}
    for modality in ("image", "video", "audio"):
        assert groups[("chat", modality)]["leak"] > 0, groups[("chat", modality)]
        assert groups[("generate-parts", modality)]["leak"] == 0
    assert results["judgements"]["counts"]["leaked_tokens"] > 0


def test_four_at_a_time_requests_are_judged_and_counters_count_each_once(
        target: Target, tmp_path: Path) -> None:
    """mixed-tenants, 40 requests sent at once, at most 4 in flight, both salt modes, the
    salt dropped on chat. Twins in flight leave some requests between their bounds (a
    problem unless allowed); the rest are judged exactly: no under-hit anywhere, no leak
    where the salt is sent, leaks where it is dropped. The counters vLLM keeps once per
    request equal the requests' prompt and cached tokens.

    Measured (vLLM 0.32.0 CPU, tiny model, salt kept): 119 of 160 judged exactly, 37
    unjudged with a source in flight, 4-5 for an earlier output's blocks; queries and hits
    equal too (this version records them at admission only)."""
    results = _run(target, "mixed-tenants", 40, tmp_path, salt_modes=["salted", "none"],
                   rate=float("inf"), max_concurrency=4, drop_salt_on=("chat",))
    groups = results["judgements"]["groups"]
    assert all(p["failed"] == 0 for p in results["passes"])
    assert sum(g["under-hit"] for g in groups) == 0, groups
    kept = [g for g in groups if g["path"] == "generate-parts"]
    assert sum(g["leak"] for g in kept) == 0, kept
    assert sum(g["judged"] for g in kept) >= 40, kept  # of 80
    assert sum(g["requests"] for g in kept) == 80
    dropped = [g for g in groups if (g["path"], g["salt_mode"]) == ("chat", "salted")]
    assert sum(g["leak"] for g in dropped) > 0, dropped
    for p in results["passes"]:
        assert p["counters_agree"] is True, p
        counters = p["counters"]
        assert counters["vllm:prompt_tokens_total"] == p["prompt_tokens"]
        assert counters["vllm:prompt_tokens_cached_total"] == p["cached_tokens"]
    counts = results["judgements"]["counts"]
    in_flight = counts["unjudged"] - counts["unjudged_output_blocks"]
    assert counts["no-layout"] == counts["unjudged_unknown_source"] == 0
    assert any(f"{in_flight} with a source in flight" in p for p in problems(results)) == (
        in_flight > 0)
