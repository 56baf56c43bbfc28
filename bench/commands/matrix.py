"""Run the same benchmark on several vLLM engines and compare adjacent ones.

One server at a time (``--ray ADDRESS``: side by side, one Ray task per engine), each
with a cold cache: the workload on every path and salt mode
(``--repeat`` times), the isolation experiment, then ``compare`` between adjacent engines
(the vLLM version is the allowed difference), then every engine as series with change
points and a dashboard (``trends/index.html``, as ``trends`` makes). A path or engine that
cannot run is ``n/a`` with the reason.

Exit codes: 0 all isolated and no gated regression; 1 a leak, an under-hit or a gated
regression; 2 an engine, a cell or a comparison could not run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.isolation.experiment import IsolationOptions
from bench.options import (
    add_fail_on_argument,
    add_run_arguments,
    add_target_arguments,
    options_from,
)
from bench.outputs import REPORTS, new_run_id
from bench.vocab import DEFAULT_FAIL_ON
from bench.workload import open_workload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default="smoke",
                        help="workload spec (name in datasets/ or path) or a workload directory")
    parser.add_argument("--seed", type=int, help="workload seed (default: the spec's)")
    parser.add_argument("--requests", type=int, help="override the spec's request count")
    parser.add_argument("--samples", type=int, default=4,
                        help="isolation side-channel sample pairs per row (0: skip; default: "
                             "%(default)s)")
    parser.add_argument("--no-isolation", dest="isolation", action="store_false",
                        help="skip the isolation experiment")
    add_fail_on_argument(parser, DEFAULT_FAIL_ON)
    parser.add_argument("--thresholds", type=Path, metavar="TOML",
                        help="gate thresholds for the comparisons (see compare --help)")
    parser.add_argument("--ray", metavar="ADDRESS",
                        help="run the engines side by side as tasks on this Ray cluster "
                             "(e.g. ray://head:10001 or auto; needs the ray package; see "
                             "docs/cluster.md)")
    parser.add_argument("--ray-cpus", type=float, default=1.0, metavar="N",
                        help="CPUs a CPU engine's task asks the cluster for (default: "
                             "%(default)s; a CUDA engine's asks for its GPUs)")
    add_run_arguments(parser)
    add_target_arguments(parser, engines=True)


def run(args: argparse.Namespace) -> int:
    from bench.campaigns.matrix import run_matrix
    from bench.compare.thresholds import load_thresholds
    from bench.report import compare_tables as ct
    from bench.report.markdown import matrix_summary
    from bench.report.tables import report_console, to_rich

    console = Console(stderr=True)
    load_thresholds(args.thresholds)  # a bad file fails before minutes of provisioning
    workload = open_workload(args.spec, args.seed, args.requests)
    opts = options_from(args)
    iso = IsolationOptions(paths=args.paths, samples=args.samples, fail_on=args.fail_on,
                           timeout_s=args.timeout) if args.isolation else None
    out = args.out or REPORTS / new_run_id("matrix")
    doc = run_matrix(args, workload, opts, iso, args.thresholds, out, console, matrix_summary)
    stdout = report_console()
    for table in ct.matrix_tables(doc):
        stdout.print(to_rich(table))
    if doc["trends"].get("dashboard"):
        console.print(f"dashboard: {doc['trends']['dashboard']}")
    console.print(f"matrix: {out} (exit {doc['exit_code']})")
    return doc["exit_code"]
