"""What salting costs in capacity as tables (console, Markdown) and a chart: SLO attainment
and the prefix-cache hit rate against load per path, with and without salt."""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FormatStrFormatter

from bench.report.markdown import to_markdown
from bench.report.style import PALETTE, plt, save, series_style  # plt: Agg backend set
from bench.report.tables import Table, fmt


def method(doc: dict) -> str:
    """How the capacities and their intervals were made, said with every result."""
    window = doc["settings"]["window"]
    probes = (f"(all, then those within a factor {window} of that estimate)" if window
              else "(all)")
    return (f"Each capacity is where a logistic curve of SLO attainment against log rate, "
            f"fitted to its search's probes {probes} with their overdispersion (the "
            f"probe is the unit: under queueing a probe's misses come in runs), meets the "
            f"target; its "
            f"interval is Fieller's at a nominal {doc['settings']['level']:.0%} "
            f"(docs/capacity.md gives its coverage on simulated queues). What salting costs "
            f"is fitted from both salt modes' probes at once: one curve, a common slope and a "
            f"shift for salt, its interval Fieller's at the same level.")


def _capacity(row: dict) -> str:
    low, high = fmt(row["low"], ".2f"), fmt(row["high"], ".2f")
    return f"{fmt(row['estimate'], '.2f')} [{low}, {high}]"


def capacity_table(doc: dict) -> Table:
    """Per path and salt mode: the capacity with its interval, how the search ended, the
    probes' overdispersion, what it cost."""
    rows = [[r["path"], r["salt_mode"], _capacity(r),
             "; ".join(x for x in (r["stopped"], r["fit"]["why"]) if x),
             str(len(r["probes"])), str(sum(p["sent"] for p in r["probes"])),
             fmt(r["fit"]["dispersion"], ".2f"),
             fmt(max((p["hit_rate"] or 0.0 for p in r["probe_log"]), default=None), ".3f")]
            for r in doc["rows"]]
    return Table(f"Capacity: the highest request rate with SLO attainment >= "
                 f"{doc['settings']['target']:.0%} ({doc['slo']})",
                 ["path", "salt mode", "capacity req/s [interval]", "search", "probes",
                  "requests", "overdispersion", "hit rate (highest)"], rows, keys=2, text=1)


def load_points(row: dict) -> list[dict]:
    """A search's loads in rate order, each with its probes' mean prefix-cache hit rate and
    median TTFT (None where no probe had one)."""
    def mean(values: list) -> float | None:
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    out = []
    for load in sorted(row["loads"], key=lambda x: x["rate"]):
        probes = [p for p in row["probe_log"] if p["rate"] == load["rate"]]
        out.append({**load, "hit_rate": mean([p["hit_rate"] for p in probes]),
                    "median_ttft_ms": mean([p["median_ttft_ms"] for p in probes])})
    return out


def loads_table(doc: dict) -> Table:
    """Every load probed: its attainment with interval, hit rate and TTFT."""
    rows = [[r["path"], r["salt_mode"], f"{x['rate']:.3g}", str(x["sent"]),
             f"{x['attainment']:.3f} [{x['interval'][0]:.3f}, {x['interval'][1]:.3f}]",
             fmt(x["hit_rate"], ".3f"), fmt(x["median_ttft_ms"], ".1f")]
            for r in doc["rows"] for x in load_points(r)]
    return Table("Every load probed: SLO attainment (95% Wilson interval widened by the "
                 "search's overdispersion), the prefix-cache hit rate and median TTFT (mean "
                 "over its probes)",
                 ["path", "salt mode", "req/s", "requests", "SLO attainment",
                  "hit rate", "median TTFT ms"], rows, keys=2, text=1)


def cost_lines(doc: dict) -> list[str]:
    """One sentence per path: what salting costs in capacity, with its interval."""
    lines = []
    for c in doc["costs"]:
        if c["point"] is None:
            lines.append(f"On {c['path']}, what salting costs in capacity could not be told "
                         f"({c['why']}).")
            continue
        between = (f"between {c['low']:.0%} and {c['high']:.0%}" if c["why"] == "" else
                   f"its interval unbounded: {c['why']}")
        lines.append(f"Salting costs {c['point']:.0%} of capacity on {c['path']} ({between}).")
    return lines


def capacity_markdown(doc: dict) -> str:
    return "\n\n".join([f"# What salting costs in capacity ({doc['spec']})",
                        "\n".join(f"- {line}" for line in cost_lines(doc)),
                        to_markdown(capacity_table(doc)),
                        to_markdown(loads_table(doc)),
                        f"Cache state: {doc['cache_state']}.",
                        method(doc)]) + "\n"


def capacity_chart(doc: dict, out_dir: Path) -> list[Path]:
    """A column per path: SLO attainment (with its interval) against request rate, one series
    per salt mode, the target as a line, each capacity dotted and its interval shaded; below
    it the
    prefix-cache hit rate at each load."""
    paths = list(dict.fromkeys(r["path"] for r in doc["rows"]))
    fig, axes = plt.subplots(2, len(paths), figsize=(6.0 * len(paths), 7.0), squeeze=False,
                             sharex="col", height_ratios=[3, 1.4], layout="constrained")
    target = doc["settings"]["target"]
    for ax, hits, path in zip(axes[0], axes[1], paths):
        for i, row in enumerate(r for r in doc["rows"] if r["path"] == path):
            loads = load_points(row)
            style = series_style(i)
            rates = [x["rate"] for x in loads]
            values = [x["attainment"] for x in loads]
            errors = [[max(v - x["interval"][0], 0.0) for v, x in zip(values, loads)],
                      [max(x["interval"][1] - v, 0.0) for v, x in zip(values, loads)]]
            ax.errorbar(rates, values, yerr=errors, marker="o", capsize=3, color=style["color"],
                        label=f"{row['salt_mode']}: {_capacity(row)} req/s")
            hits.plot(rates, [x["hit_rate"] for x in loads], marker=style["marker"],
                      linestyle=style["linestyle"], color=style["color"], label=row["salt_mode"])
            if row["estimate"] is not None:
                ax.axvline(row["estimate"], color=style["color"], linestyle=":", linewidth=1)
            if row["low"] is not None and row["high"] is not None:
                ax.axvspan(row["low"], row["high"], color=style["color"], alpha=0.15)
        ax.axhline(target, color=PALETTE[-1], linestyle="--", linewidth=1)
        ax.set_xscale("log")
        for axis in (ax.xaxis.set_major_formatter, ax.xaxis.set_minor_formatter):
            axis(FormatStrFormatter("%g"))
        ax.set_title(path)
        hits.set_xlabel("request rate, req/s")
        hits.set_ylabel("prefix-cache hit rate")
        hits.set_ylim(-0.02, 1.02)
        ax.set_ylabel(f"SLO attainment ({doc['slo']})")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(title="salt mode: capacity", fontsize=8)
    fig.suptitle("\n".join(cost_lines(doc)) or "What salting costs in capacity",
                 fontweight="bold", color=PALETTE[-1], fontsize=10)
    return save(fig, out_dir, "capacity")
