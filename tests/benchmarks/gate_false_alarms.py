"""How often does ``compare`` fail two sets of runs of the same build? (A benchmark of the
gate, not a test: its figure goes into the README.)

    .venv/bin/python tests/benchmarks/gate_false_alarms.py OUT [RUNS] [--per-side K]
        [--thresholds TOML]

Makes RUNS (default 6) runs of the same build, each on its own server start (as a CI job's
base and candidate sets are), with the compare fixtures' scenario (``smoke``, 24 requests,
chat and generate-parts, both salt modes, two repetitions), then compares every two
disjoint sets of K runs (default 3) and prints the share of comparisons with a gate failure
(exit 1: a false alarm), those that cannot be judged (exit 2) and the false alarms per
metric. ``OUT/summary.json`` keeps the figures; run directories already in OUT are reused.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from pathlib import Path

from rich.console import Console

from bench.engine.open import open_target
from bench.options import target_args
from bench.outputs import RESULTS_FILE, new_run_id
from bench.report.compare_report import compare_and_report
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
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
    parser.add_argument("--per-side", type=int, default=3, help="runs (server starts) per side")
    parser.add_argument("--thresholds", type=Path)
    args = parser.parse_args()
    if not 1 <= args.per_side <= args.runs // 2:
        parser.error(f"--per-side must be between 1 and RUNS / 2 ({args.runs // 2})")
    console = Console(stderr=True)
    dirs = make_runs(args.out, args.runs, console)
    exits, per_metric, rows = Counter(), Counter(), 0
    pairs = [(base, new) for base in itertools.combinations(dirs, args.per_side)
             for new in itertools.combinations([d for d in dirs if d not in base], args.per_side)]
    for base, new in pairs:
        name = "-".join(d.name for d in base) + "-vs-" + "-".join(d.name for d in new)
        doc = compare_and_report(list(base), list(new), args.thresholds, [],
                                 args.out / f"cmp-{name}")
        exits[doc["exit_code"]] += 1
        gated = [r for r in doc["rows"] if r["gated"]]
        rows += len(gated)
        per_metric.update(r["metric"] for r in gated if r["state"] == REGRESSED)
    summary = {"runs": len(dirs), "per_side": args.per_side, "comparisons": len(pairs),
               "failing": exits[1], "false_alarm_rate": exits[1] / len(pairs),
               "cannot_judge_rate": exits[2] / len(pairs), "gated_rows": rows,
               "false_alarm_rate_rows": sum(per_metric.values()) / rows,
               "per_metric": dict(per_metric), "thresholds": str(args.thresholds)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
