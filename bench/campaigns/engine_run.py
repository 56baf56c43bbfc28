"""One engine of a matrix, wherever it runs (this process, or a Ray task on a node):
provisioned, served with a cold cache, the workload run and isolated, its report built;
its matrix entry. An engine that cannot be provisioned or started is ``n/a`` with the
reason."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from bench.engine.open import open_target
from bench.engine.spec import EngineSpec
from bench.errors import BenchError
from bench.isolation.experiment import IsolationOptions, isolate
from bench.outputs import REPORT_PAGE, new_run_id
from bench.report.build import build_report
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.verdicts.boundary import boundary_rows, per_cell
from bench.verdicts.boundary import exit_code as isolation_exit
from bench.verdicts.runs import problems
from bench.vocab import CHANNELS
from bench.workload import Workload


def _engine_args(args: argparse.Namespace, spec: EngineSpec) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "engine": spec, "engine_python": None,
                                 "server_url": None})


def one_engine(args: argparse.Namespace, spec: EngineSpec, workload: Workload,
               opts: RunOptions, iso: IsolationOptions | None, out: Path,
               console: Console) -> dict:
    """Provision, serve, run and isolate one engine; its entry of the matrix."""
    entry: dict = {"engine": str(spec), "dir": str(out)}
    started = time.monotonic()
    try:
        with open_target(_engine_args(args, spec), console) as target:
            meta = target.metadata
            entry.update(vllm_version=meta.get("vllm_version"),
                         server_start_s=meta.get("server_start_s"),
                         flags_dropped=meta.get("flags_dropped", []),
                         routes_unavailable=meta.get("routes_unavailable", {}))
            run_id = new_run_id(spec.slug)
            results = run_benchmark(target, workload, opts, out, run_id, console)
            entry.update(unavailable=results["unavailable"], problems=problems(results))
            if iso is not None:
                isolation = isolate(target, iso, out, run_id, console)
                entry["isolation"] = {f"{c['path']}/{c['modality']}": c["verdict"]
                                      for c in isolation["cells"]}
                entry["boundary"] = {f"{r['path']}/{r['modality']}": {c: r[c] for c in CHANNELS}
                                     for r in per_cell(boundary_rows(isolation))}
                entry["isolation_exit"] = isolation_exit(isolation)
        entry["report"] = str(build_report([out], out) / REPORT_PAGE)
    except BenchError as exc:
        entry.update(status="n/a", error=str(exc))
        console.print(f"[red]{spec}: {exc}[/]")
    else:
        entry["status"] = "ok"
    entry["duration_s"] = round(time.monotonic() - started, 1)
    return entry
