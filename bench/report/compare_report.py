"""A comparison end to end: two sides (run directories or sets of them) in, every output
file written."""

from __future__ import annotations

from pathlib import Path

from bench.compare.dashboard import dashboard
from bench.compare.session import compare_dirs
from bench.docio import write_json, write_text
from bench.outputs import COMPARE_FILE, COMPARE_MD
from bench.report.compare_html import write_compare_html
from bench.report.markdown import compare_summary


def compare_and_report(base_dir: Path | list[Path], new_dir: Path | list[Path],
                       thresholds_path: Path | None, allow: list[str], out: Path,
                       allow_inconclusive: bool = False) -> dict:
    """Compare and write ``compare.json``, ``compare.md``, the dashboard files and the HTML
    page into ``out``; return the comparison document."""
    doc, base, new = compare_dirs(base_dir, new_dir, thresholds_path, allow, allow_inconclusive)
    write_json(out / COMPARE_FILE, doc)
    write_text(out / COMPARE_MD, compare_summary(doc))
    for name, entries in dashboard(doc).items():
        write_json(out / f"dashboard-{name}.json", entries)
    write_compare_html(doc, base, new, out)
    return doc
