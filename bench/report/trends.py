"""Trends for people: a Markdown summary for a job page, a chart per headline metric with
its change points marked, and one static HTML dashboard (opens from disk) with the verdict
strip and links to each run's own report."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

from bench.docio import write_json, write_text
from bench.outputs import RESULTS_FILE
from bench.registry import METRICS, POINTS
from bench.report.html import PAGE, table_html
from bench.report.markdown import to_markdown
from bench.report.style import PALETTE, plt, save, series_style  # plt: Agg backend set
from bench.report.tables import Table
from bench.trends.build import TRENDS_FILE
from bench.vocab import CHANNELS, COMPARE_STYLE, VERDICT_STYLE

#: The metrics drawn on the dashboard (where the runs have them).
HEADLINE = ("median_ttft_ms", "mean_tpot_ms", "request_throughput", "hit_rate",
            "slo_attainment")
DASHBOARD_FILE = "index.html"
#: A chart panel's width grows with the runs up to this; beyond MAX_TICKS runs, every k-th
#: run is labelled (the table of change points names each change's run).
MAX_PANEL_INCHES, MAX_TICKS = 16.0, 36


def _change_text(series: dict, change: dict) -> str:
    def pct(v: float | None) -> str:
        if v is None:
            return "?"
        return f"{v:+.1f}pp" if series["change_unit"] == POINTS else f"{v:+.1%}"
    return f"{pct(change['change'])} [{pct(change['low'])}, {pct(change['high'])}]"


def changes_table(doc: dict) -> Table:
    """Every change point: where, which series, its size and interval, its state."""
    labels = [e["label"] for e in doc["entries"]]
    rows = [[labels[c["entry"]], s["path"], s["modality"], s["salt_mode"],
             METRICS[s["metric"]].label, _change_text(s, c), s["threshold"], c["state"]]
            for s in doc["series"] for c in s["changes"]]
    return Table("Change points (at the first run after each)",
                 ["run", "path", "modality", "salt mode", "metric", "change [interval]",
                  "threshold", "state"], rows, keys=5, text=1)


def strip_table(doc: dict) -> Table:
    """The verdict strip: per entry its worst verdict per tenant-boundary channel."""
    rows = [[e["label"], *[e["boundary"].get(c) or "not run" for c in CHANNELS],
             str(len(e["problems"]))] for e in doc["entries"]]
    return Table("Tenant boundary per run (worst verdict per channel)",
                 ["run", *CHANNELS, "problems"], rows, keys=1, text=len(CHANNELS) + 1)


def summary_lines(doc: dict) -> list[str]:
    newest = doc["newest"]
    lines = [f"{len(doc['entries'])} runs ordered by {doc['order']}; newest: "
             f"{newest['label']}."]
    origins: dict[int, list[dict]] = {}
    for r in newest["regressed"]:
        origins.setdefault(r["change"]["entry"], []).append(r)
    for entry, found in sorted(origins.items()):
        groups = sorted({f"{r['path']} / {r['modality']} / {r['salt_mode']}" for r in found})
        metrics = ", ".join(dict.fromkeys(METRICS[r["metric"]].label for r in found))
        lines.append(f"The newest run lies after a regression from "
                     f"{doc['entries'][entry]['label']}: {metrics} on "
                     + (groups[0] if len(groups) == 1 else f"{len(groups)} path x modality x "
                        "salt mode groups (see the change points)") + ".")
    if newest["boundary_findings"]:
        lines.append("The newest run has tenant-boundary findings: "
                     + ", ".join(newest["boundary_findings"]) + ".")
    if newest["problems"]:
        lines.append(f"The newest run has {len(newest['problems'])} problems.")
    found = sum(len(s["changes"]) for s in doc["series"])
    lines.append(f"{found} change points in {len(doc['series'])} series." if found else
                 f"No change point in {len(doc['series'])} series.")
    return lines


def trends_markdown(doc: dict) -> str:
    parts = ["# Trends", "\n".join(f"- {line}" for line in summary_lines(doc)),
             to_markdown(strip_table(doc))]
    if any(s["changes"] for s in doc["series"]):
        parts.append(to_markdown(changes_table(doc)))
    return "\n\n".join(parts) + "\n"


def trend_charts(doc: dict, out_dir: Path) -> dict[str, Path]:
    """Per headline metric a chart: a panel per path, a line per modality x salt mode with
    each run's interval, change points as vertical lines coloured as compare's states
    (grey: a change within the threshold). Returns caption -> PNG."""
    labels = [e["label"] for e in doc["entries"]]
    charts = {}
    for name in [m for m in HEADLINE if any(s["metric"] == m for s in doc["series"])]:
        series = [s for s in doc["series"] if s["metric"] == name]
        paths = list(dict.fromkeys(s["path"] for s in series))
        fig, axes = plt.subplots(1, len(paths), figsize=(min(max(6.0, 0.45 * len(labels)),
                                                             MAX_PANEL_INCHES) * len(paths), 4.2),
                                 squeeze=False, layout="constrained")
        every = -(-len(labels) // MAX_TICKS)  # label every run up to MAX_TICKS, then thin
        for ax, path in zip(axes.flat, paths):
            for i, s in enumerate(x for x in series if x["path"] == path):
                style = series_style(i)
                pts = [(p["entry"], p) for p in s["points"] if p["value"] is not None]
                xs = [x for x, _ in pts]
                ys = [p["value"] for _, p in pts]
                err = [[max(p["value"] - p["low"], 0) if p["low"] is not None else 0
                        for _, p in pts],
                       [max(p["high"] - p["value"], 0) if p["high"] is not None else 0
                        for _, p in pts]]
                ax.errorbar(xs, ys, yerr=err, marker=style["marker"], capsize=2,
                            linestyle=style["linestyle"], color=style["color"],
                            label=f"{s['modality']} / {s['salt_mode']}")
                for c in s["changes"]:
                    ax.axvline(c["entry"] - 0.5, color=COMPARE_STYLE.get(c["state"], "#888888"),
                               linestyle="--", linewidth=1)
            ax.set_xticks(range(0, len(labels), every), labels[::every], rotation=45, ha="right",
                          fontsize=7)
            ax.set_title(path)
            ax.set_ylabel(f"{METRICS[name].label} ({METRICS[name].unit})")
            ax.legend(fontsize=7)
        fig.suptitle(f"{METRICS[name].label} across runs", color=PALETTE[-1])
        png = save(fig, out_dir, f"trend-{name}")[0]
        charts[f"{METRICS[name].label} across runs; dashed lines: change points"] = png
    return charts


def _strip_html(doc: dict, out_dir: Path) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in ["run", *CHANNELS, "problems", "report"])
    rows = []
    for e in doc["entries"]:
        cells = [f"<td>{escape(e['label'])}</td>"]
        for c in CHANNELS:
            v = e["boundary"].get(c)
            colour, _, ink = VERDICT_STYLE.get(v or "", ("#EEEEEE", "", "black"))
            cells.append(f'<td style="background:{colour};color:{ink}">'
                         f'{escape(v or "not run")}</td>')
        cells.append(f"<td class=n>{len(e['problems'])}</td>")
        links = " ".join(f'<a href="{escape(os.path.relpath(p, out_dir))}">'
                         f'{"results" if p.endswith(RESULTS_FILE) else "report"}</a>'
                         for p in e["reports"])
        cells.append(f"<td>{links or '–'}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<h2>Tenant boundary per run</h2><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def dashboard(doc: dict, charts: dict[str, Path], out_dir: Path) -> str:
    """The static page: the summary, the verdict strip, the charts (SVG beside the page),
    the change points."""
    body = ["<ul class=findings>" + "".join(f"<li>{escape(x)}</li>"
                                            for x in summary_lines(doc)) + "</ul>",
            _strip_html(doc, out_dir)]
    body += [f'<figure><img alt="{escape(caption)}" src="{escape(png.with_suffix(".svg").name)}">'
             f"<figcaption>{escape(caption)}</figcaption></figure>"
             for caption, png in charts.items()]
    if any(s["changes"] for s in doc["series"]):
        body.append(table_html(changes_table(doc)))
    return PAGE.substitute(title="saltbench trends", body="\n".join(body))


def write_trends(doc: dict, out_dir: Path) -> Path:
    """Write the trends document, its Markdown summary, charts and dashboard into
    ``out_dir``; the dashboard's path."""
    write_json(out_dir / TRENDS_FILE, doc)
    write_text(out_dir / "trends.md", trends_markdown(doc))
    charts = trend_charts(doc, out_dir)
    write_text(out_dir / DASHBOARD_FILE, dashboard(doc, charts, out_dir))
    return out_dir / DASHBOARD_FILE
