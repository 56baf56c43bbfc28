"""Run a workload through request paths, with and without salt, and record everything.

``--resume DIR`` continues an interrupted or stopped run in DIR with its own workload,
options and salts; the engine options choose the server it continues on.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from bench.engine.open import open_target
from bench.errors import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, BenchError
from bench.options import add_run_arguments, add_target_arguments, options_from
from bench.outputs import REPORTS, RESULTS_FILE, new_run_id
from bench.report.replica_tables import replica_table, routing_table
from bench.report.tables import print_summary, report_console, to_rich
from bench.run.resume import load_resume
from bench.run.session import run_benchmark
from bench.verdicts.runs import problems
from bench.workload import open_workload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default="smoke",
                        help="workload spec (name in datasets/ or path) or a workload directory")
    parser.add_argument("--seed", type=int, help="workload seed (default: the spec's)")
    parser.add_argument("--requests", type=int, help="override the spec's request count")
    parser.add_argument("--resume", type=Path, metavar="DIR",
                        help="continue the interrupted run in DIR (its workload, options and "
                             "salts; only --deadline and the engine options apply)")
    parser.add_argument("--ray", metavar="ADDRESS",
                        help="the --workers are Ray actors spread over this cluster's nodes "
                             "(clocks aligned to this one's; needs the ray package; see "
                             "docs/cluster.md)")
    add_run_arguments(parser)
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    resume = None
    if args.resume:
        if args.out and args.out.resolve() != args.resume.resolve():
            raise BenchError("--resume writes into the run's own directory; drop --out")
        resume = load_resume(args.resume, args.deadline)
        recorded = resume.metadata["workload"]
        workload = open_workload(recorded["dir"])
        if workload.metadata["spec"] != recorded["spec"] or workload.metadata["seed"] != \
                recorded["seed"] or workload.metadata["counts"] != recorded["counts"]:
            raise BenchError(f"--resume {args.resume}: the workload in {recorded['dir']} "
                             "changed since the run started")
        opts, run_id, out = resume.options, resume.run_id, args.resume
    else:
        workload = open_workload(args.spec, args.seed, args.requests)
        opts = replace(options_from(args), ray=args.ray)
        run_id = new_run_id(workload.metadata["spec"]["name"])
        out = args.out or REPORTS / run_id
    with open_target(args, console) as target:
        results = run_benchmark(target, workload, opts, out, run_id, console, resume)
    stdout = report_console()
    print_summary(results, stdout)
    if results.get("replicas"):
        for table in (replica_table(results), routing_table(results)):
            stdout.print(to_rich(table))
    console.print(f"results: {out / RESULTS_FILE}")
    for problem in (found := problems(results)):
        console.print(f"[red]{problem}[/]")
    if results["stopped"]:
        return EXIT_INCOMPLETE
    return EXIT_FAILED if found else EXIT_OK
