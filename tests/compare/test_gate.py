"""The gate fails closed (issue 28, item 3) on SYNTHETIC sets of runs built as ``run``
writes them (per-repetition group rows and their spread), each run one server start: a
large regression with a large spread across starts fails, a small hit rate's drop fails,
and what cannot be judged is not a pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.compare.pair import compare_runs
from bench.compare.samples import Group, RunSamples, Side
from bench.compare.thresholds import Settings, Thresholds
from bench.results import spread
from bench.vocab import INCONCLUSIVE, REGRESSED

KEY = ("chat", "text", "salted")
N = 24


def synthetic_run(name: str, ttft_levels: list[float], hits: list[float] | None = None,
                  seed: int = 0) -> RunSamples:
    """A SYNTHETIC run of one group: per repetition ``N`` requests whose TTFTs scatter
    (lognormal, sigma 0.3) around that repetition's level, with that repetition's hit rate."""
    rng = np.random.default_rng(seed)
    requests, rows = [], []
    for rep, level in enumerate(ttft_levels):
        ttft = level * rng.lognormal(-0.045, 0.3, N)
        prompt = np.full(N, 100.0)
        cached = prompt * (0.5 if hits is None else hits[rep])
        requests.append({"ttft_ms": ttft, "e2el_ms": ttft + 10, "tpot_ms": np.full(N, 3.0),
                         "itl_sum_ms": np.full(N, 10.0), "itl_count": np.full(N, 4.0),
                         "cached_tokens": cached, "prompt_tokens": prompt})
        rows.append({"path": KEY[0], "modality": KEY[1], "salt_mode": KEY[2],
                     "repetition": rep, "mean_ttft_ms": float(ttft.mean()),
                     "median_ttft_ms": float(np.median(ttft)),
                     "p99_ttft_ms": float(np.percentile(ttft, 99)),
                     "mean_e2el_ms": float(ttft.mean() + 10),
                     "p99_e2el_ms": float(np.percentile(ttft, 99) + 10),
                     "mean_tpot_ms": 3.0, "p99_tpot_ms": 3.0, "mean_itl_ms": 2.5,
                     "request_throughput": 1000 / level, "output_throughput": 4000 / level,
                     "hit_rate": float(cached.sum() / prompt.sum()), "leaked_tokens": 0})
    passes = [{"index": r, "path": KEY[0], "salt_mode": KEY[2], "repetition": r, "failed": 0}
              for r in range(len(ttft_levels))]
    counts = {"leak": 0, "under-hit": 0, "unjudged": 0, "no-layout": 0,
              "unjudged_output_blocks": 0, "leaked_tokens": 0, "missing_tokens": 0}
    results = {"run_id": name, "metadata": {"target": {}}, "passes": passes,
               "interrupted": False, "groups": rows, "spread": spread(rows),
               "judgements": {"counts": counts, "eviction_possible": False}}
    return RunSamples(Path(name), results, None, {KEY: Group(requests, rows, [0] * len(rows))})


def synthetic_set(name: str, ttft_levels: list[float], hits: list[float] | None = None,
                  seed: int = 0) -> Side:
    """A SYNTHETIC set of runs, one per level (and hit rate), each its own server start."""
    return Side.of([synthetic_run(f"{name}-{i}", [level], None if hits is None else [hits[i]],
                                  seed * 100 + i) for i, level in enumerate(ttft_levels)])


def _row(doc: dict, metric: str) -> dict:
    [row] = [r for r in doc["rows"] if r["metric"] == metric]
    return row


def test_a_tripled_mean_ttft_with_45pc_spread_fails() -> None:
    """It was inconclusive (spread over max_cv, checked before the regression) and exit 0."""
    base = synthetic_set("base", [20.0, 21.0, 19.0, 20.5, 19.5], seed=1)
    levels = 60.0 * (1 + 0.45 * np.array([-1.26, -0.63, 0, 0.63, 1.26]))
    [cv] = [s["metrics"]["mean_ttft_ms"]["cv"]
            for s in synthetic_run("new", list(levels), seed=2).results["spread"]]
    assert cv > 0.40
    new = synthetic_set("new", list(levels), seed=2)
    doc = compare_runs(base, new, Thresholds(), {})
    assert _row(doc, "mean_ttft_ms")["state"] == REGRESSED
    assert doc["exit_code"] == 1


def test_a_tripled_mean_ttft_at_two_repetitions_is_not_a_pass() -> None:
    base = synthetic_set("base", [20.0, 21.0], seed=1)
    new = synthetic_set("new", [33.0, 87.0], seed=2)  # tripled, 64% CV
    doc = compare_runs(base, new, Thresholds(), {})
    assert _row(doc, "mean_ttft_ms")["state"] in (REGRESSED, INCONCLUSIVE)
    assert doc["exit_code"] != 0


def test_a_325pp_hit_rate_drop_fails() -> None:
    """The spread of a small hit rate (5% and 10%: CV 47%) made a 32.5pp drop inconclusive."""
    base = synthetic_set("base", [20.0, 20.0], hits=[0.40, 0.40])
    new = synthetic_set("new", [20.0, 20.0], hits=[0.05, 0.10])
    doc = compare_runs(base, new, Thresholds(), {})
    row = _row(doc, "hit_rate")
    assert row["state"] == REGRESSED and abs(row["change"] + 32.5) < 1e-9
    assert doc["exit_code"] == 1


def test_a_gated_inconclusive_metric_fails_unless_reported() -> None:
    """One server start per side cannot judge a timing metric: exit 2, not 0."""
    base, new = synthetic_set("base", [20.0], seed=1), synthetic_set("new", [20.0], seed=2)
    doc = compare_runs(base, new, Thresholds(), {})
    assert _row(doc, "mean_ttft_ms")["state"] == INCONCLUSIVE
    assert "one server start per side" in _row(doc, "mean_ttft_ms")["reason"]
    assert doc["exit_code"] == 2
    report = Thresholds(settings=Settings(inconclusive="report"))
    assert compare_runs(base, new, report, {})["exit_code"] == 0


def test_five_repetitions_of_one_start_cannot_clear_a_change() -> None:
    """Five repetitions of one run share its server start: a +10% TTFT whose repetitions
    agree was cleared (no significant change, exit 0), although the next start may shift
    every repetition by 25%; now it is inconclusive (exit 2)."""
    base = Side.of([synthetic_run("base", [20.0, 21.0, 19.0, 20.5, 19.5], seed=1)])
    new = Side.of([synthetic_run("new", [22.0, 23.0, 21.0, 22.5, 21.5], seed=2)])
    doc = compare_runs(base, new, Thresholds(), {})
    row = _row(doc, "mean_ttft_ms")
    assert row["state"] == INCONCLUSIVE and (row["n_base"], row["reps_base"]) == (1, 5)
    assert doc["base"]["starts"] == 1 and doc["base"]["repetitions"] == 5
    assert doc["exit_code"] == 2
