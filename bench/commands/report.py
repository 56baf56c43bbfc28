"""Build charts, a self-contained HTML page and a Markdown summary from run results."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.outputs import REPORTS
from bench.results import read_results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", nargs="+", type=Path, metavar="RESULTS",
                        help="run directories or results.json files (several: side by side)")
    parser.add_argument("--label", action="append", dest="labels", metavar="TEXT",
                        help="label of each run in order (default: its run id); repeat")
    parser.add_argument("--out", type=Path,
                        help="report directory (default: the run's own directory; with "
                             "several runs, reports/<first run id>-vs-<n-1 more>)")


def run(args: argparse.Namespace) -> int:
    from bench.report.build import build_report  # matplotlib only when reporting
    from bench.report.load import results_path

    first = results_path(args.results[0])
    if args.out:
        out = args.out
    elif len(args.results) == 1:
        out = first.parent
    else:
        out = REPORTS / f"{read_results(first)['run_id']}-vs-{len(args.results) - 1}-more"
    print(build_report(args.results, out, args.labels))
    return 0
