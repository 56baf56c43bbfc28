"""``--repeat``: every repetition is its own passes, in alternating order, and the results
give each headline metric's spread across repetitions."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from bench.engine.target import Target
from bench.outputs import new_run_id
from bench.run.passes import RunOptions
from bench.run.session import run_benchmark
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
    spread = {(s["path"], s["modality"], s["salt_mode"]): s for s in results["spread"]}
    assert spread and all(s["repetitions"] == 2 for s in spread.values())
    for s in spread.values():
        assert s["metrics"]["mean_ttft_ms"]["cv"] >= 0
        assert s["metrics"]["hit_rate"]["mean"] >= 0
    counts = results["judgements"]["counts"]
    assert counts["judged"] == counts["met"]
    assert counts["judged"] + counts["unjudged_output_blocks"] == counts["requests"]
