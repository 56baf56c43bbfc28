"""The comparison page renders: SYNTHETIC runs (made-up requests), only to exercise the
report's own code paths, not evidence of how vLLM behaves."""

import re
from html import escape
from itertools import product
from pathlib import Path

import numpy as np
from matplotlib import pyplot as plt
from PIL import Image

from bench.compare.pair import compare_runs
from bench.compare.samples import Group, RunSamples, Side
from bench.compare.thresholds import Thresholds
from bench.report.compare_html import COMPARE_CHARTS, throughputs, write_compare_html
from bench.report.compare_tables import summary_line
from bench.vocab import NOT_AVAILABLE, REGRESSED

KEYS = [("chat", "text", "none"), ("chat", "text", "salted"),
        ("generate-parts", "image", "none"), ("generate-parts", "image", "salted")]
N = 40


def columns(rng: np.random.Generator, slow: float, hit: float) -> dict[str, np.ndarray]:
    ttft = rng.lognormal(np.log(40.0), 0.2, N) * slow
    prompt = np.full(N, 200.0)
    return {"ttft_ms": ttft, "e2el_ms": ttft + 300.0, "tpot_ms": rng.normal(10.0, 0.5, N),
            "itl_sum_ms": np.full(N, 300.0), "itl_count": np.full(N, 30.0),
            "cached_tokens": np.round(prompt * hit * rng.uniform(0.9, 1.0, N)),
            "prompt_tokens": prompt, "leaked_tokens": np.zeros(N)}


def synthetic_run(run_id: str, keys: list, slow: float, seed: int, reps: int = 2) -> RunSamples:
    """A SYNTHETIC run: ``reps`` repetitions of ``N`` requests per group; TTFT x ``slow``."""
    rng = np.random.default_rng(seed)
    groups: dict = {}
    for key in keys:
        hit = 0.8 if key[2] == "none" else 0.4
        rows = [{"path": key[0], "modality": key[1], "salt_mode": key[2], "repetition": r,
                 "request_throughput": 20.0 / slow + rng.normal(0, 0.2)} for r in range(reps)]
        groups[key] = Group([columns(rng, slow, hit) for _ in range(reps)], rows, [0] * reps)
    path_modes = dict.fromkeys((k[0], k[2]) for k in keys)
    passes = [{"index": i, "path": p, "salt_mode": m, "repetition": r, "failed": 0,
               "request_throughput": 20.0 / slow + rng.normal(0, 0.2)}
              for i, ((p, m), r) in enumerate(product(path_modes, range(reps)))]
    meta = {"target": {"vllm_version": "0.0.test", "model": "synthetic", "block_size": 16},
            "date": "2026-01-01", "machine": {"cpu": "synthetic", "cpu_count": 1},
            "workload": {"spec": {"name": "synthetic", "sha256": "0" * 8}, "seed": seed}}
    counts = {"leak": 0, "under-hit": 0, "unjudged": 0, "no-layout": 0,
              "unjudged_output_blocks": 0, "leaked_tokens": 0, "missing_tokens": 0}
    results = {"run_id": run_id, "metadata": meta, "passes": passes, "interrupted": False,
               "groups": [row for g in groups.values() for row in g.rows],
               "judgements": {"counts": counts, "eviction_possible": False}}
    return RunSamples(Path(run_id), results, None, groups)


def synthetic_side(label: str, keys: list, slow: float, seed: int, runs: int = 2,
                   reps: int = 2) -> Side:
    """A SYNTHETIC set of ``runs`` runs (server starts) of ``reps`` repetitions each."""
    return Side.of([synthetic_run(f"{label}-{i}", keys, slow, seed * 10 + i, reps)
                    for i in range(runs)], Path(label))


def test_compare_page(tmp_path):
    base = synthetic_side("base-run", KEYS, slow=1.0, seed=1)
    new = synthetic_side("new-run", KEYS[:-1], slow=3.0, seed=2)  # TTFT x3, one group fewer
    doc = compare_runs(base, new, Thresholds(), {})
    assert any(r["metric"] == "mean_ttft_ms" and r["state"] == REGRESSED for r in doc["rows"])
    path = write_compare_html(doc, base, new, tmp_path)
    assert path == tmp_path / "compare.html" and path.exists()
    html = path.read_text()
    assert escape(summary_line(doc)) in html
    assert html.count("data:image/png;base64,") == len(COMPARE_CHARTS)
    for name in COMPARE_CHARTS:
        with Image.open(tmp_path / "charts" / f"{name}.png") as img:
            img.verify()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    files = [r for r in refs if not r.startswith(("data:", "#", "http"))]
    assert files and all((tmp_path / f).is_file() for f in files)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>.*?</tr>", html)]
    assert ["chat", "text", "none", "mean TTFT"] in [r[:4] for r in rows if REGRESSED in r]
    assert "<h3>Groups only one run has (n/a)</h3>" in html
    assert ["generate-parts", "image", "salted", "new"] in [r[:4] for r in rows]
    assert any(m["state"] == NOT_AVAILABLE for m in doc["missing"])
    assert "<details><summary>Every metric" in html
    assert "base: 2 run(s) (server starts), 4 repetition(s)" in html


def test_throughput_of_one_server_start_has_no_interval():
    """Two repetitions of one run share its server start: no interval in the chart either."""
    base = synthetic_side("base-run", KEYS[:1], slow=1.0, seed=1, runs=1)
    new = synthetic_side("new-run", KEYS[:1], slow=1.0, seed=2, runs=1)
    doc = compare_runs(base, new, Thresholds(), {})
    fig, caption = throughputs(doc, base, new)
    plt.close(fig.figure)
    assert "base and new had one server start: no interval" in caption
