"""Compare two sides (BASE, NEW), each a run directory or a directory of run directories
(one per server start, e.g. runs/base/1..3): every headline metric per path x modality x
salt mode with a t interval over server starts of its change, thresholds, isolation, the
problems of every run, and a gate for CI that fails closed.

Exit codes: 0 the gate passed; 1 problems in a run of the new side, a gated regression or
an isolation verdict lost; 2 nothing failed but the gate cannot pass: problems in a run of
the base side, a gated metric inconclusive (without --allow-inconclusive; one server start
per side leaves every varying metric so), runs that cannot be compared (across or within a
side) or bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.compare.comparability import FIELDS
from bench.outputs import REPORTS, new_run_id


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", type=Path,
                        help="the baseline: a run directory, or a directory of run directories "
                             "(one per server start)")
    parser.add_argument("new", type=Path, help="the candidate: as BASE")
    parser.add_argument("--thresholds", type=Path, metavar="TOML",
                        help="gate thresholds and settings (see README: Compare and gate)")
    parser.add_argument("--allow", action="append", default=[], metavar="FIELD",
                        help="a metadata field that may differ, e.g. target.vllm_version; "
                             f"repeat (checked: {', '.join(FIELDS)})")
    parser.add_argument("--out", type=Path,
                        help="output directory (default: reports/<compare-id>)")
    parser.add_argument("--allow-inconclusive", action="store_true",
                        help="report gated inconclusive metrics without failing (exit 2) on "
                             "them (thresholds file: inconclusive = \"report\")")
    parser.add_argument("--all", action="store_true",
                        help="print every metric, not only what changed or is inconclusive")


def run(args: argparse.Namespace) -> int:
    from bench.report import compare_tables as ct
    from bench.report.compare_report import compare_and_report  # numpy/scipy when comparing
    from bench.report.tables import report_console, to_rich

    console = Console(stderr=True)
    out = args.out or REPORTS / new_run_id("compare")
    doc = compare_and_report(args.base, args.new, args.thresholds, args.allow, out,
                             args.allow_inconclusive)
    stdout = report_console()
    for side in ("base", "new"):
        stdout.print(ct.side_line(doc, side), markup=False, highlight=False)
    tables = [ct.changes_table(doc, title="Every metric")] if args.all else []
    for table in [*tables, *ct.headline_tables(doc)]:
        if table.rows:
            stdout.print(to_rich(table))
    stdout.print(f"[{'red' if doc['exit_code'] else 'green'}]{ct.summary_line(doc)}[/]")
    console.print(f"comparison: {out}")
    return doc["exit_code"]
