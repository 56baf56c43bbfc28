"""``--repeat``: every repetition is its own passes, in alternating order, and the results
give each headline metric's spread across repetitions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from bench.engine.target import Target
from bench.outputs import new_run_id
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.workload import open_workload


def test_repeated_passes_alternate_and_report_spread(target: Target, tmp_path: Path) -> None:
    opts = RunOptions(paths=["chat", "generate-tokens"], repeat=2, warmup=1)
    results = run_benchmark(target, open_workload("smoke", requests=6), opts, tmp_path,
                            new_run_id("repeat"), Console(stderr=True))
    order = [(p["repetition"], p["path"], p["salt_mode"]) for p in results["passes"]]
    first = [(0, path, mode) for path in opts.paths for mode in ("none", "salted")]
    assert order == first + [(1, path, mode) for _, path, mode in reversed(first)]
    tags = [p["tag"] for p in results["passes"]]
    assert len(set(tags)) == 8 and len({len(t) for t in tags}) == 1  # same prompt lengths
    assert not results["prompt_token_mismatches"]
    assert {g["repetition"] for g in results["groups"]} == {0, 1}
    groups: dict[tuple, list[dict]] = {}
    for g in sorted(results["groups"], key=lambda g: g["repetition"]):
        groups.setdefault((g["path"], g["modality"], g["salt_mode"]), []).append(g)
    spread = {(s["path"], s["modality"], s["salt_mode"]): s for s in results["spread"]}
    # A spread row for every path x modality x salt mode, over both repetitions.
    assert set(spread) == set(groups)
    assert {(path, mode) for path, _, mode in spread} == {
        (path, mode) for path in opts.paths for mode in ("none", "salted")}
    for key, s in spread.items():
        assert s["repetitions"] == 2 and len(groups[key]) == 2, key
        for name in ("mean_ttft_ms", "p99_ttft_ms", "request_throughput", "hit_rate"):
            values = np.array([g[name] for g in groups[key]], dtype=float)
            assert s["metrics"][name]["mean"] == pytest.approx(values.mean()), (key, name)
            cv = values.std(ddof=1) / abs(values.mean()) if values.mean() else None
            assert s["metrics"][name]["cv"] == pytest.approx(cv), (key, name)
        # Serial passes with fresh tags: each repetition gets the same cache hits.
        assert groups[key][0]["cached_tokens"] == groups[key][1]["cached_tokens"], key
        assert s["metrics"]["hit_rate"]["cv"] in (0.0, None), key
        assert s["metrics"]["mean_ttft_ms"]["cv"] > 0, key  # two timings never agree exactly
    counts = results["judgements"]["counts"]
    assert counts["judged"] == counts["met"]
    assert counts["judged"] + counts["unjudged_output_blocks"] == counts["requests"]
