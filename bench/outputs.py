"""Where a run's files go, and what they are called: ``reports/<run-id>/``.

Every JSON document carries its ``kind`` (below) and :data:`bench.SCHEMA_VERSION`.
"""

from __future__ import annotations

import datetime as dt
import secrets
from pathlib import Path

REPORTS = Path("reports")
RECORDS_FILE = "records.jsonl"
PASSES_FILE = "passes.jsonl"  # one line per finished pass (resume keeps them)
LAYOUTS_FILE = "layouts.jsonl"
RESULTS_FILE, RESULTS_KIND = "results.json", "saltbench-run"
ISOLATION_FILE, ISOLATION_KIND = "isolation.json", "saltbench-isolation"
COMPARE_FILE, COMPARE_KIND, COMPARE_MD = "compare.json", "saltbench-compare", "compare.md"
MATRIX_FILE, MATRIX_KIND, MATRIX_MD = "matrix.json", "saltbench-matrix", "matrix.md"
AB_FILE, AB_KIND = "ab.json", "saltbench-ab"
#: A run's report page (``report``), beside its results unless told otherwise.
REPORT_PAGE, REPORT_SUMMARY = "index.html", "summary.md"


def new_run_id(label: str) -> str:
    return f"{dt.datetime.now():%Y%m%d-%H%M%S}-{label}-{secrets.token_hex(3)}"
