"""The same benchmark on several engines, one server at a time (or, with ``--ray``, side by
side on a Ray cluster: :mod:`bench.campaigns.ray_engines`), each with a cold cache:
per engine a run directory (records, results, isolation, its report), then a comparison of every
adjacent pair, then the engines that ran as series (:mod:`bench.trends`: change points,
the verdict strip, a dashboard in ``trends/``). An engine that cannot be provisioned or
started is ``n/a`` with the reason; the others still run. ``matrix.json`` is rewritten
after every engine.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from bench import SCHEMA_VERSION
from bench.campaigns.engine_run import one_engine
from bench.compare.thresholds import load_thresholds
from bench.docio import write_json, write_text
from bench.errors import BenchError
from bench.isolation.experiment import IsolationOptions
from bench.outputs import MATRIX_FILE, MATRIX_KIND, MATRIX_MD
from bench.report.compare_report import compare_and_report
from bench.report.trends import write_trends
from bench.run.settings import RunOptions
from bench.trends.build import build_trends
from bench.trends.series import VERSION, load_entries
from bench.vocab import (
    DEFAULT_FAIL_ON,
    EXIT_CANNOT_JUDGE,
    EXIT_FOUND,
    EXIT_OK,
    IMPROVED,
    INCONCLUSIVE,
    REGRESSED,
    worst_exit,
)
from bench.workload import Workload

#: What differs between engines on purpose; every other difference refuses the comparison.
ENGINE_FIELDS = ["target.vllm_version"]
#: Where the matrix's series and dashboard go.
TRENDS_DIR = "trends"


def run_matrix(args: argparse.Namespace, workload: Workload, opts: RunOptions,
               iso: IsolationOptions | None, thresholds: Path | None, out: Path,
               console: Console, render: Callable[[dict], str]) -> dict:
    """Every engine, then every adjacent comparison; write ``matrix.json`` and ``.md``."""
    doc: dict = {"schema_version": SCHEMA_VERSION, "kind": MATRIX_KIND,
                 "workload": workload.metadata["spec"], "engines": [], "comparisons": []}

    def save() -> None:
        write_json(out / MATRIX_FILE, doc)
        write_text(out / MATRIX_MD, render(doc))

    if getattr(args, "ray", None):
        from bench.campaigns.ray_engines import run_on_ray

        doc["engines"] = [{"engine": str(s), "dir": str(out / s.slug), "status": "running"}
                          for s in args.engines]

        def done(i: int, entry: dict) -> None:
            doc["engines"][i] = entry
            save()

        run_on_ray(args, workload, opts, iso, out, console, done)
    else:
        for spec in args.engines:
            console.rule(f"{spec}")
            doc["engines"].append(one_engine(args, spec, workload, opts, iso, out / spec.slug,
                                             console))
            save()
    compare_adjacent(doc, thresholds, out, save)
    trend_engines(doc, thresholds, out / TRENDS_DIR, iso.fail_on if iso else DEFAULT_FAIL_ON)
    save()
    return doc


def trend_engines(doc: dict, thresholds: Path | None, out: Path,
                  fail_on: tuple[str, ...] = DEFAULT_FAIL_ON) -> None:
    """The engines that ran as series in version order (``trends``' statistics and
    dashboard); ``doc["trends"]`` says where, or why not. Its exit code is the trends'
    own: the matrix's comes from the adjacent comparisons and the runs."""
    ran = [Path(e["dir"]) for e in doc["engines"] if e["status"] == "ok"]
    if not ran:
        doc["trends"] = {"error": "no engine ran"}
        return
    try:
        trends = build_trends(load_entries(ran, VERSION), load_thresholds(thresholds), VERSION,
                              fail_on)
    except BenchError as exc:
        doc["trends"] = {"error": str(exc)}
        return
    doc["trends"] = {"dir": str(out), "dashboard": str(write_trends(trends, out)),
                     "exit_code": trends["exit_code"], "newest": trends["newest"]}


def compare_adjacent(doc: dict, thresholds: Path | None, out: Path,
                     save: Callable[[], None]) -> None:
    """Compare every adjacent pair of engines that ran; set the matrix's exit code."""
    ran = [e for e in doc["engines"] if e["status"] == "ok"]
    doc["comparisons"] = []
    for base, new in zip(ran, ran[1:]):
        pair_dir = out / f"compare-{Path(base['dir']).name}-vs-{Path(new['dir']).name}"
        entry = {"base": base["engine"], "new": new["engine"], "dir": str(pair_dir)}
        try:
            result = compare_and_report(Path(base["dir"]), Path(new["dir"]), thresholds,
                                  ENGINE_FIELDS, pair_dir)
            entry.update(summary=result["summary"], exit_code=result["exit_code"],
                         confidence=result["settings"]["confidence"],
                         headline=[r for r in result["rows"] if r["state"] in (REGRESSED, IMPROVED)
                                   or (r["state"] == INCONCLUSIVE and r["gated"])])
        except BenchError as exc:
            entry.update(exit_code=2, error=str(exc))
        doc["comparisons"].append(entry)
        save()
    doc["exit_code"] = matrix_exit(doc)
    save()


def matrix_exit(doc: dict) -> int:
    """1: an engine's run has problems, a leak or an under-hit, or a pair regressed; else 2:
    an engine could not run, an isolation cell failed or a pair could not be compared or
    judged; else 0 (:func:`bench.vocab.worst_exit`)."""
    codes = [c["exit_code"] for c in doc["comparisons"]]
    for e in doc["engines"]:
        codes += [EXIT_CANNOT_JUDGE if e["status"] != "ok" else EXIT_OK,
                  EXIT_FOUND if e.get("problems") else EXIT_OK, e.get("isolation_exit", EXIT_OK)]
    return worst_exit(codes)
