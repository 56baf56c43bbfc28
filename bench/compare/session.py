"""A comparison end to end: two run directories in, every output file written."""

from __future__ import annotations

from pathlib import Path

from bench.compare.comparability import check
from bench.compare.dashboard import dashboard
from bench.compare.pair import compare_runs
from bench.compare.samples import load_run
from bench.compare.thresholds import load_thresholds
from bench.docio import write_json, write_text
from bench.outputs import COMPARE_FILE, COMPARE_MD


def compare_dirs(base_dir: Path, new_dir: Path, thresholds_path: Path | None,
                 allow: list[str], out: Path) -> dict:
    """Check, compare and write ``compare.json``, ``compare.md``, the dashboard files and
    the HTML page into ``out``; return the comparison document."""
    from bench.report.compare_html import write_compare_html
    from bench.report.markdown import compare_summary

    thresholds = load_thresholds(thresholds_path)  # bad input fails before any work
    base, new = load_run(base_dir), load_run(new_dir)
    allowed = check(base.results["metadata"], new.results["metadata"], allow)
    doc = compare_runs(base, new, thresholds, allowed)
    write_json(out / COMPARE_FILE, doc)
    write_text(out / COMPARE_MD, compare_summary(doc))
    for name, entries in dashboard(doc).items():
        write_json(out / f"dashboard-{name}.json", entries)
    write_compare_html(doc, base, new, out)
    return doc
