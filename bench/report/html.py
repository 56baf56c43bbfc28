"""The self-contained HTML page: findings, metadata, charts (embedded PNG) and every table."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path
from string import Template

from bench.report import tables
from bench.report.findings import findings
from bench.report.load import Run
from bench.report.replica_tables import replica_tables

PAGE = Template("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .6em}th{background:#f2f2f2}
td.n{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:.85em;color:#555}
ul.findings{font-size:1.05em;line-height:1.5}
</style></head><body>
<h1>$title</h1>
$body
</body></html>
""")


def table_html(table: tables.Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in table.headers)
    rows = "".join(
        "<tr>" + "".join(f"<td{' class=n' if table.numeric(i) else ''}>{escape(c)}</td>"
                         for i, c in enumerate(row)) + "</tr>\n" for row in table.rows)
    return (f"<h3>{escape(table.title)}</h3>\n<table><thead><tr>{head}</tr></thead>\n"
            f"<tbody>{rows}</tbody></table>")


def chart_html(png: Path, caption: str) -> str:
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    svg = f"charts/{png.stem}.svg"
    return (f'<figure id="chart-{escape(png.stem)}"><img alt="{escape(caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{escape(caption)} '
            f'(<a href="{escape(svg)}">SVG</a>)</figcaption></figure>')


def run_header(run: Run) -> str:
    """The run's name, its findings, judgements and metadata: what a reader needs before
    the charts."""
    meta = tables.Table("Metadata", ["key", "value"], [[k, v] for k, v in run.meta().items()], 2)
    found = "".join(f"<li>{escape(f)}</li>" for f in findings(run.results, run.isolation))
    return "\n".join([f"<h2>Run {escape(run.label)}</h2>",
                      f'<h3>Findings</h3><ul class="findings">{found}</ul>',
                      f"<p>{escape(tables.judgement_line(run.results))}</p>", table_html(meta)])


def run_tables(run: Run) -> str:
    shown = [tables.pass_table(run.results), *tables.failure_tables(run.results),
             tables.group_table(run.results), *tables.goodput_tables(run.results),
             tables.judgement_table(run.results)]
    shown += [t for t in (tables.spread_table(run.results), tables.problem_table(run.results))
              if t.rows]
    if run.isolation:
        shown += [tables.boundary_table(run.isolation), tables.verdict_table(run.isolation),
                  tables.side_channel_table(run.isolation),
                  tables.uuid_table(run.isolation)]
    shown += replica_tables(run.results, run.isolation)
    return "\n".join([f"<h2>Tables: {escape(run.label)}</h2>", *map(table_html, shown)])


def page(runs: list[Run], charts: dict[str, Path]) -> str:
    """The page for ``runs``: findings and metadata first, then ``charts`` (caption -> PNG),
    then tables."""
    title = "saltbench report: " + ", ".join(run.label for run in runs)
    body = [run_header(run) for run in runs]
    body += [chart_html(png, caption) for caption, png in charts.items()]
    body += [run_tables(run) for run in runs]
    return PAGE.substitute(title=escape(title), body="\n".join(body))
