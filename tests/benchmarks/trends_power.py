"""The change-point procedure's false-alarm and detection rates on simulated series (issue 25;
a benchmark, not a test: its figures go to docs/trends.md; tests/trends/test_changes.py
asserts bounds on them).

    .venv/bin/python tests/benchmarks/trends_power.py [--series 200] [--seed 1]

20 entries per series, request throughput, each server start off by its own lognormal
offset (sd 5%), threshold 5%. Per setting: the share of series with any change point, and
with a regression found within one entry of the true step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "trends"))
from simulated import KEY, series  # noqa: E402

from bench.registry import METRICS  # noqa: E402
from bench.trends.changes import changes  # noqa: E402
from bench.vocab import REGRESSED  # noqa: E402

SETTINGS = {
    "same build, 1 start per entry": {},
    "same build, 2 starts per entry": {"starts": 2},
    "10% drop half-way, 1 start": {"step_at": 10, "step": -0.10},
    "10% drop half-way, 2 starts": {"step_at": 10, "step": -0.10, "starts": 2},
    "20% drop half-way, 1 start": {"step_at": 10, "step": -0.20},
    "20% drop at the newest run only": {"step_at": 19, "step": -0.20},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    metric = METRICS["request_throughput"]
    print("| series | any change found | a regression found within one run of the step |")
    print("|---|---|---|")
    for label, kw in SETTINGS.items():
        found = caught = 0
        for _ in range(args.series):
            points = changes(metric, series(rng, **kw), KEY, 0.05)
            found += bool(points)
            caught += "step_at" in kw and any(
                abs(c.index - kw["step_at"]) <= 1 and c.state == REGRESSED for c in points)
        shown = f"{caught / args.series:.1%}" if "step_at" in kw else "–"
        print(f"| {label} | {found / args.series:.1%} | {shown} |")


if __name__ == "__main__":
    main()
