"""The Markdown summary (PR comment, step summary), from the tables in :mod:`bench.report.tables`.

The HTML page and the console render the same tables, so all agree on every number.
"""

from __future__ import annotations

from bench.report.findings import findings
from bench.report.load import Run
from bench.report.replica_tables import replica_tables
from bench.report.tables import (
    Table,
    boundary_table,
    failure_tables,
    goodput_tables,
    judgement_line,
    pass_table,
    spread_table,
    verdict_table,
)


def meta_line(run: Run) -> str:
    return " · ".join(f"{k} **{v}**" for k, v in run.meta().items())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table) -> str:
    align = ["--:" if table.numeric(i) else ":--" for i in range(len(table.headers))]
    lines = [table.headers, align, *table.rows]
    return "\n".join("| " + " | ".join(_cell(c) for c in line) + " |" for line in lines)


def summary(runs: list[Run]) -> str:
    """The Markdown summary: per run, its findings, metadata, per-pass table and verdicts."""
    parts = ["## saltbench report"]
    for run in runs:
        parts += [f"### {run.label}",
                  "\n".join(f"- {f}" for f in findings(run.results, run.isolation)),
                  meta_line(run), to_markdown(pass_table(run.results)),
                  *(f"#### {t.title}\n\n{to_markdown(t)}"
                    for t in [*failure_tables(run.results), *goodput_tables(run.results)]),
                  judgement_line(run.results)]
        if run.results.get("spread"):
            parts.append(to_markdown(spread_table(run.results)))
        if run.isolation:
            parts += [to_markdown(boundary_table(run.isolation)),
                      to_markdown(verdict_table(run.isolation))]
        parts += [f"#### {t.title}\n\n{to_markdown(t)}"
                  for t in replica_tables(run.results, run.isolation)]
    return "\n\n".join(parts) + "\n"


def compare_summary(doc: dict) -> str:
    """The Markdown of a comparison: verdict, both runs, what changed, then every metric."""
    from bench.report import compare_tables as ct

    sides = [f"- {ct.side_line(doc, side)}" for side in ("base", "new")]
    allowed = [f"- allowed difference `{k}`: {a!r} → {b!r}"
               for k, (a, b) in doc["allowed_differences"].items()]
    parts = ["## saltbench compare", f"**{ct.summary_line(doc)}**", "\n".join(sides + allowed)]
    parts += [f"#### {t.title}\n\n{to_markdown(t)}" for t in ct.headline_tables(doc) if t.rows]
    every = ct.changes_table(doc, title="Every metric")
    parts.append(f"<details><summary>Every metric ({len(every.rows)} rows)</summary>\n\n"
                 f"{to_markdown(every)}\n\n</details>")
    return "\n\n".join(parts) + "\n"


def matrix_summary(doc: dict) -> str:
    """The Markdown of a matrix: engines, isolation per engine, adjacent comparisons and
    what changed between them."""
    from bench.report import compare_tables as ct

    parts = ["## saltbench matrix", f"workload **{doc['workload']['name']}** "
             f"(sha256 {doc['workload']['sha256'][:12]})"]
    parts += [f"#### {t.title}\n\n{to_markdown(t)}" for t in ct.matrix_tables(doc)]
    for c in doc["comparisons"]:
        if c.get("headline"):
            table = ct.changes_table({"rows": c["headline"], "settings": {"confidence": c["confidence"]}},
                                     title=f"{c['base']} → {c['new']}")
            parts.append(f"#### What changed: {table.title}\n\n{to_markdown(table)}")
    trends = doc.get("trends", {})
    if trends.get("dashboard"):
        parts.append(f"Every engine as series, with change points: `{trends['dashboard']}` "
                     f"(trends exit {trends['exit_code']}).")
    elif trends.get("error"):
        parts.append(f"No trends: {trends['error']}.")
    return "\n\n".join(parts) + "\n"
