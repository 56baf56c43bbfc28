"""How often does ``compare`` fail a pair of runs of the same build? (A benchmark of the
gate, not a test: its figure goes into the README.)

    .venv/bin/python tests/benchmarks/gate_false_alarms.py OUT [RUNS] [--thresholds TOML]

Makes RUNS (default 6) runs of the same build, each on its own server (as a CI job's base
and candidate are), with the compare fixtures' scenario (``smoke``, 24 requests, chat and
generate-parts, both salt modes, two repetitions), then compares every pair (older run as base) and
prints the share of pairs with a gate failure and the false alarms per metric.
``OUT/summary.json`` keeps the figures; run directories already in OUT are reused.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from pathlib import Path

from rich.console import Console

from bench.compare.session import compare_dirs
from bench.engine.target import open_target
from bench.options import target_args
from bench.outputs import RESULTS_FILE, new_run_id
from bench.run.passes import RunOptions
from bench.run.session import run_benchmark
from bench.vocab import REGRESSED
from bench.workload import open_workload


def make_runs(out: Path, runs: int, console: Console) -> list[Path]:
    dirs = [out / f"run{i}" for i in range(runs)]
    for d in dirs:
        if (d / RESULTS_FILE).exists():
            continue
        with open_target(target_args(model_preset="tiny"), console) as target:
            run_benchmark(target, open_workload("smoke", requests=24),
                          RunOptions(paths=["chat", "generate-parts"], repeat=2), d,
                          new_run_id(d.name), console)
    return dirs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", type=int, nargs="?", default=6)
    parser.add_argument("--thresholds", type=Path)
    args = parser.parse_args()
    console = Console(stderr=True)
    dirs = make_runs(args.out, args.runs, console)
    failing_pairs, per_metric, rows = 0, Counter(), 0
    pairs = list(itertools.combinations(dirs, 2))
    for base, new in pairs:
        doc = compare_dirs(base, new, args.thresholds, [], args.out / f"cmp-{base.name}-{new.name}")
        failing_pairs += bool(doc["exit_code"])
        gated = [r for r in doc["rows"] if r["gated"]]
        rows += len(gated)
        per_metric.update(r["metric"] for r in gated if r["state"] == REGRESSED)
    summary = {"runs": len(dirs), "pairs": len(pairs), "pairs_failing": failing_pairs,
               "false_alarm_rate_pairs": failing_pairs / len(pairs), "gated_rows": rows,
               "false_alarm_rate_rows": sum(per_metric.values()) / rows,
               "per_metric": dict(per_metric), "thresholds": str(args.thresholds)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
