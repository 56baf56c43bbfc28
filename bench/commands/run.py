"""Run a workload through request paths, with and without salt, and record everything."""

from __future__ import annotations

import argparse

from rich.console import Console

from bench.engine.target import open_target
from bench.options import add_run_arguments, add_target_arguments, options_from
from bench.outputs import REPORTS, RESULTS_FILE, new_run_id
from bench.report.tables import print_summary, report_console
from bench.run.session import run_benchmark
from bench.verdicts.runs import problems
from bench.workload import open_workload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default="smoke",
                        help="workload spec (name in datasets/ or path) or a workload directory")
    parser.add_argument("--seed", type=int, help="workload seed (default: the spec's)")
    parser.add_argument("--requests", type=int, help="override the spec's request count")
    add_run_arguments(parser)
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    workload = open_workload(args.spec, args.seed, args.requests)
    opts = options_from(args)
    run_id = new_run_id(workload.metadata["spec"]["name"])
    out = args.out or REPORTS / run_id
    with open_target(args, console) as target:
        results = run_benchmark(target, workload, opts, out, run_id, console)
    print_summary(results, report_console())
    console.print(f"results: {out / RESULTS_FILE}")
    for problem in (found := problems(results)):
        console.print(f"[red]{problem}[/]")
    return 1 if found else 0
