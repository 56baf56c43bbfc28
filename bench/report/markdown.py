"""The Markdown summary (PR comment, step summary), from the tables in :mod:`bench.report.tables`.

The HTML page and the console render the same tables, so all agree on every number.
"""

from __future__ import annotations

from bench.report.load import Run
from bench.report.tables import Table, judgement_line, pass_table, verdict_table


def meta_line(run: Run) -> str:
    return " · ".join(f"{k} **{v}**" for k, v in run.meta().items())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table) -> str:
    align = [":--"] * table.keys + ["--:"] * (len(table.headers) - table.keys)
    lines = [table.headers, align, *table.rows]
    return "\n".join("| " + " | ".join(_cell(c) for c in line) + " |" for line in lines)


def summary(runs: list[Run]) -> str:
    """The Markdown summary: per run, its metadata, per-pass table and verdicts."""
    parts = ["## saltbench report"]
    for run in runs:
        parts += [f"### {run.label}", meta_line(run), to_markdown(pass_table(run.results)),
                  judgement_line(run.results)]
        if run.isolation:
            parts.append(to_markdown(verdict_table(run.isolation)))
    return "\n\n".join(parts) + "\n"
