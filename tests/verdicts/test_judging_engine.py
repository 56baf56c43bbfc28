"""Every request of the shipped multi-tenant workloads judged on the real engine: met,
and a dropped salt caught on image-only and video-only requests too."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from bench.engine.target import Target
from bench.outputs import new_run_id
from bench.run.passes import RunOptions
from bench.run.session import run_benchmark
from bench.workload import open_workload

PATHS = ["chat", "generate-parts"]


def _run(target: Target, spec: str, n: int, out: Path, **opts) -> dict:
    workload = open_workload(spec, requests=n)
    options = RunOptions(paths=PATHS, salt_modes=["salted"], warmup=0, **opts)
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
