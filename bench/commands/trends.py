"""Many runs (nightly builds, a version matrix) as series: per headline metric x path x
modality x salt mode each run's value with its interval, change points (ruptures proposes,
a permutation test confirms; see bench.trends.changes) attributed to the run after them,
the tenant boundary per run as a strip, and one static HTML dashboard.

Exit codes: 0 the newest run lies after no regression; 1 it does (a gated series' last
change point regressed, or the newest run has problems or a tenant-boundary finding on a
``--fail-on`` channel);
2 bad input or runs that cannot be compared.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.compare.comparability import FIELDS
from bench.options import add_fail_on_argument
from bench.outputs import REPORTS, new_run_id
from bench.trends.series import ORDERS, VERSION
from bench.vocab import DEFAULT_FAIL_ON


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", type=Path,
                        help="each a run directory, or a directory of runs of one build (one "
                             "per server start)")
    parser.add_argument("--runs-in", type=Path, action="append", default=[], metavar="DIR",
                        help="every subdirectory of DIR is a run (or a set); repeat")
    parser.add_argument("--order", choices=ORDERS, default=VERSION,
                        help="order of the runs: vLLM version (dev builds by their commit "
                             "count), date of the first run, or as given (default: version)")
    parser.add_argument("--thresholds", type=Path, metavar="TOML",
                        help="which metrics gate and by how much (as compare's)")
    parser.add_argument("--allow", action="append", default=[], metavar="FIELD",
                        help="a metadata field that may differ between runs besides the vLLM "
                             f"version; repeat (checked: {', '.join(FIELDS)})")
    add_fail_on_argument(parser, DEFAULT_FAIL_ON)
    parser.add_argument("--out", type=Path, help="output directory (default: reports/<id>)")


def run(args: argparse.Namespace) -> int:
    from bench.compare.thresholds import load_thresholds
    from bench.errors import BenchError
    from bench.report.tables import report_console, to_rich
    from bench.report.trends import changes_table, strip_table, summary_lines, write_trends
    from bench.trends.build import build_trends
    from bench.trends.series import load_entries

    paths = list(args.runs)
    for folder in args.runs_in:
        if not folder.is_dir():
            raise BenchError(f"--runs-in {folder}: not a directory")
        paths += sorted(d for d in folder.iterdir() if d.is_dir())
    entries = load_entries(paths, args.order, args.allow)
    doc = build_trends(entries, load_thresholds(args.thresholds), args.order, args.fail_on)
    page = write_trends(doc, args.out or REPORTS / new_run_id("trends"))
    stdout = report_console()
    stdout.print(to_rich(strip_table(doc)))
    if any(s["changes"] for s in doc["series"]):
        stdout.print(to_rich(changes_table(doc)))
    for line in summary_lines(doc):
        stdout.print(line, markup=False, highlight=False)
    Console(stderr=True).print(f"dashboard: {page}")
    return doc["exit_code"]
