"""What salting costs in capacity as tables (console, Markdown) and a chart: SLO attainment
against load per path, with and without salt."""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FormatStrFormatter

from bench.report.markdown import to_markdown
from bench.report.style import PALETTE, plt, save, series_style  # plt: Agg backend set
from bench.report.tables import Table, fmt


def _bracket(row: dict) -> str:
    low, high = fmt(row["low"], ".2f"), fmt(row["high"], ".2f")
    return f"[{low}, {high})"


def capacity_table(doc: dict) -> Table:
    """Per path and salt mode: the capacity bracket, how the search ended, its cost."""
    rows = [[r["path"], r["salt_mode"], _bracket(r), r["stopped"], str(len(r["probes"])),
             str(sum(p["sent"] for p in r["probes"])),
             fmt(max((p["hit_rate"] or 0.0 for p in r["probe_log"]), default=None), ".3f")]
            for r in doc["rows"]]
    return Table(f"Capacity: the highest request rate with SLO attainment >= "
                 f"{doc['settings']['target']:.0%} ({doc['slo']})",
                 ["path", "salt mode", "capacity req/s [low, high)", "search", "probes",
                  "requests", "hit rate (highest)"], rows, keys=2, text=1)


def cost_lines(doc: dict) -> list[str]:
    """One sentence per path: what salting costs in capacity, with its interval."""
    lines = []
    for c in doc["costs"]:
        if c["point"] is None:
            lines.append(f"On {c['path']}, what salting costs in capacity could not be told "
                         "(a capacity end is undecided).")
            continue
        lines.append(f"Salting costs {c['point']:.0%} of capacity on {c['path']} "
                     f"(between {fmt(c['low'], '.0%')} and {fmt(c['high'], '.0%')}).")
    return lines


def capacity_markdown(doc: dict) -> str:
    return "\n\n".join([f"# What salting costs in capacity ({doc['spec']})",
                        "\n".join(f"- {line}" for line in cost_lines(doc)),
                        to_markdown(capacity_table(doc)),
                        f"Cache state: {doc['cache_state']}."]) + "\n"


def capacity_chart(doc: dict, out_dir: Path) -> list[Path]:
    """A panel per path: SLO attainment (with its interval) against request rate, one series
    per salt mode, the target as a line and each capacity bracket shaded."""
    paths = list(dict.fromkeys(r["path"] for r in doc["rows"]))
    fig, axes = plt.subplots(1, len(paths), figsize=(6.0 * len(paths), 4.5), squeeze=False,
                             layout="constrained")
    target = doc["settings"]["target"]
    for ax, path in zip(axes.flat, paths):
        for i, row in enumerate(r for r in doc["rows"] if r["path"] == path):
            loads = row["loads"]
            style = series_style(i)
            rates = [x["rate"] for x in loads]
            values = [x["attainment"] for x in loads]
            errors = [[max(v - x["interval"][0], 0.0) for v, x in zip(values, loads)],
                      [max(x["interval"][1] - v, 0.0) for v, x in zip(values, loads)]]
            ax.errorbar(rates, values, yerr=errors, marker="o", capsize=3, color=style["color"],
                        label=f"{row['salt_mode']}: {_bracket(row)} req/s")
            if row["low"] is not None and row["high"] is not None:
                ax.axvspan(row["low"], row["high"], color=style["color"], alpha=0.15)
        ax.axhline(target, color=PALETTE[-1], linestyle="--", linewidth=1)
        ax.set_xscale("log")
        for axis in (ax.xaxis.set_major_formatter, ax.xaxis.set_minor_formatter):
            axis(FormatStrFormatter("%g"))
        ax.set_title(path)
        ax.set_xlabel("request rate, req/s")
        ax.set_ylabel(f"SLO attainment ({doc['slo']})")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(title="salt mode: capacity", fontsize=8)
    fig.suptitle(" ".join(cost_lines(doc)) or "What salting costs in capacity",
                 fontweight="bold", color=PALETTE[-1], fontsize=10)
    return save(fig, out_dir, "capacity")
