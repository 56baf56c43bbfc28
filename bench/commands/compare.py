"""Compare two runs (BASE, NEW): every headline metric per path x modality x salt mode with
a bootstrap interval of its change, thresholds, isolation, and a gate for CI.

Exit codes: 0 no gated regression; 1 a gated regression or an isolation verdict lost;
2 the runs cannot be compared or the input is bad.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.compare.comparability import FIELDS
from bench.outputs import REPORTS, new_run_id


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", type=Path, help="run directory of the baseline")
    parser.add_argument("new", type=Path, help="run directory of the candidate")
    parser.add_argument("--thresholds", type=Path, metavar="TOML",
                        help="gate thresholds and settings (see README: Compare and gate)")
    parser.add_argument("--allow", action="append", default=[], metavar="FIELD",
                        help="a metadata field that may differ, e.g. target.vllm_version; "
                             f"repeat (checked: {', '.join(FIELDS)})")
    parser.add_argument("--out", type=Path,
                        help="output directory (default: reports/<compare-id>)")
    parser.add_argument("--all", action="store_true",
                        help="print every metric, not only what changed or is inconclusive")


def run(args: argparse.Namespace) -> int:
    from bench.compare.session import compare_dirs  # numpy/scipy only when comparing
    from bench.report import compare_tables as ct
    from bench.report.tables import report_console, to_rich

    console = Console(stderr=True)
    out = args.out or REPORTS / new_run_id("compare")
    doc = compare_dirs(args.base, args.new, args.thresholds, args.allow, out)
    stdout = report_console()
    tables = [ct.changes_table(doc, title="Every metric")] if args.all else []
    for table in [*tables, *ct.headline_tables(doc)]:
        if table.rows:
            stdout.print(to_rich(table))
    stdout.print(f"[{'red' if doc['exit_code'] else 'green'}]{ct.summary_line(doc)}[/]")
    console.print(f"comparison: {out}")
    return doc["exit_code"]
