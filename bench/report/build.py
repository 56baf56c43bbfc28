"""Build a report directory: ``charts/*.png|svg``, ``index.html`` and ``summary.md``."""

from __future__ import annotations

from pathlib import Path

from bench.docio import write_text
from bench.outputs import REPORT_PAGE, REPORT_SUMMARY
from bench.report import html, markdown
from bench.report.charts import CHARTS
from bench.report.load import load_runs
from bench.report.style import save


def build_report(run_dirs: list[Path], out: Path, labels: list[str] | None = None) -> Path:
    """Report on the runs in ``run_dirs`` (directories or results.json files) into ``out``."""
    runs = load_runs(run_dirs, labels)
    charts: dict[str, Path] = {}
    for name, (make, caption) in CHARTS.items():
        fig = make(runs)
        if fig is not None:
            charts[caption] = save(fig, out / "charts", name)[0]
    write_text(out / REPORT_PAGE, html.page(runs, charts))
    write_text(out / REPORT_SUMMARY, markdown.summary(runs))
    return out
