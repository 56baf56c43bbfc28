"""The HTML page of a comparison (bench.compare): verdict, tables, and charts of both sides
(each side's runs pooled; intervals over its server starts).

The tables are those of :mod:`bench.report.compare_tables` (the console and ``compare.md``
show the same strings); the charts follow :mod:`bench.report.charts` in look. Base is
always the first series (colour, marker and hatch of ``series_style(0)``), new the second.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from pathlib import Path

import numpy as np
from matplotlib.figure import SubFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from bench.compare.intervals import interval
from bench.compare.samples import Group, GroupKey, Side
from bench.compare.thresholds import REPORT
from bench.docio import write_text
from bench.registry import METRICS, POINTS, Metric
from bench.report import compare_tables as ct
from bench.report.charts import _by_modality, _dodge, _ordered
from bench.report.html import PAGE, chart_html, table_html
from bench.report.load import Run
from bench.report.style import figure, legend, save, series_style, wrap
from bench.vocab import COMPARE_STATES, COMPARE_STYLE, IMPROVED, INCONCLUSIVE, REGRESSED

COMPARE_HTML = "compare.html"
SIDES = ("base", "new")
#: A chart: (doc, base, new) -> (figure, caption), or None when there is nothing to draw.
Chart = Callable[[dict, Side, Side], tuple[SubFigure, str] | None]
#: States whose cell text is drawn in white (dark fills).
_DARK = (REGRESSED, IMPROVED)


def _footer_runs(base: Side, new: Side) -> list[Run]:
    """Every run of both sides as the style module's footer reads them, labelled base and
    new (numbered in a set)."""
    return [Run(side if len(s.runs) == 1 else f"{side} {i}/{len(s.runs)}", run.dir, run.results,
                [], run.isolation)
            for side, s in zip(SIDES, (base, new)) for i, run in enumerate(s.runs, 1)]


def _keys(base: Side, new: Side) -> list[GroupKey]:
    """Every group key of either run: paths in order, modalities in reading order."""
    keys = _ordered([*base.groups, *new.groups])
    paths = _ordered(k[0] for k in keys)
    return sorted(_by_modality(keys, key=lambda k: k[1]), key=lambda k: paths.index(k[0]))


def _side_interval(doc: dict, metric: Metric, group: Group | None
                   ) -> tuple[float | None, float | None, float | None]:
    """(value, low, high) of one side's own value at the comparison's confidence level (t
    interval over its server starts)."""
    if group is None:
        return None, None, None
    s = doc["settings"]
    return interval(metric, group, level=s["confidence"], min_requests=s["min_requests"])


def _interval_bars(ax, categories: list[str], series: list[tuple[str, list[tuple]]],
                   spec: str, scale: float = 1.0) -> list:
    """Dodged bars of (value, low, high) per category with the interval as error bars,
    values written at the whisker end; ``n/a`` where a series has no value (NaN bounds:
    no error bar)."""
    offsets, width = _dodge(len(series))
    x = np.arange(len(categories))
    handles = []
    for i, ((label, points), off) in enumerate(zip(series, offsets)):
        st = series_style(i)
        v, lo, hi = (np.array([np.nan if p is None else p * scale for p in col], dtype=float)
                     for col in zip(*points))
        bars = ax.bar(x + off, v, width, yerr=[v - lo, hi - v], color=st["color"], hatch=st["hatch"],
                      edgecolor="black", linewidth=0.5, capsize=3, label=label,
                      error_kw={"elinewidth": 1, "ecolor": "black"})
        ax.bar_label(bars, ["" if np.isnan(h) else format(h, spec) for h in v], fontsize=6.5,
                     padding=2)
        for xi in (x + off)[np.isnan(v)]:
            ax.text(xi, 0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
        handles.append(bars)
    ax.set_xticks(x, categories)
    ax.set_xlim(-0.5, len(categories) - 0.5)  # a category without bars (n/a) keeps its place
    ax.margins(y=0.18)
    return handles


def _ttfts(run: Side, path: str, mode: str) -> np.ndarray:
    """Sorted positive TTFTs (ms) of ``path`` x ``mode``, every modality, repetition and run
    of the side."""
    values = [rep["ttft_ms"] for (p, _, m), g in run.groups.items() if (p, m) == (path, mode)
              for rep in g.requests]
    values = np.sort(np.concatenate(values)) if values else np.empty(0)
    return values[values > 0]  # NaN (no first token) and zeros cannot go on a log axis


def ttft_cdfs(doc: dict, base: Side, new: Side) -> tuple[SubFigure, str] | None:
    """Empirical CDF of TTFT per path, base vs new per salt mode (modalities, repetitions
    and a side's runs pooled), on a log axis."""
    keys = _keys(base, new)
    if not keys:
        return None
    paths, modes = _ordered(k[0] for k in keys), _ordered(k[2] for k in keys)
    ncols = min(len(paths), 2)
    fig, axes = figure("TTFT distribution per request path: base vs new (measure phase, "
                       "modalities, repetitions and runs pooled)", _footer_runs(base, new),
                       ncols=ncols, nrows=-(-len(paths) // ncols), size=(10, 6.5),
                       sharex=True, sharey=True)
    for ax, path in zip(axes, paths):
        counts = []
        for i, run in enumerate((base, new)):
            for j, mode in enumerate(modes):
                values = _ttfts(run, path, mode)
                counts.append(len(values))
                y = np.arange(1, len(values) + 1) / max(len(values), 1)
                ax.step(values, y, where="post", color=series_style(i)["color"],
                        marker=series_style(i)["marker"], markevery=max(1, len(values) // 8),
                        markersize=4, linestyle=series_style(j)["linestyle"],
                        linewidth=2.4 - i)  # base wider: it shows under an identical new
        ax.set_title(f"{path}  (n base/new: {sum(counts[:len(modes)])}/"
                     f"{sum(counts[len(modes):])})")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
    for ax in axes[len(paths):]:
        ax.set_visible(False)
    for ax in axes[-ncols:]:
        ax.set_xlabel("TTFT (ms, log scale)")
    for ax in axes[::ncols]:
        ax.set_ylabel("fraction of requests ≤ TTFT")
    legend(fig, [Line2D([], [], color=series_style(i)["color"], marker=series_style(i)["marker"],
                        linestyle=series_style(j)["linestyle"], linewidth=2.4 - i,
                        label=f"{side} · salt mode: {mode}")
                 for i, side in enumerate(SIDES) for j, mode in enumerate(modes)], ncol=len(modes))
    return fig, ("TTFT distribution per path, base vs new (colour and marker: run; line style: "
                 "salt mode; successful measured requests of every modality, repetition and run of "
                 "each side)")


def hit_rates(doc: dict, base: Side, new: Side) -> tuple[SubFigure, str] | None:
    """Prefix-cache hit rate per path x modality, one panel per salt mode, base vs new with
    each side's own t interval over its server starts."""
    keys = _keys(base, new)
    if not keys:
        return None
    modes = _ordered(k[2] for k in keys)
    level, metric = doc["settings"]["confidence"], METRICS["hit_rate"]
    fig, axes = figure(f"Prefix-cache hit rate by path and modality: base vs new "
                       f"(error bars: {level:.0%} t interval over each side's server starts)",
                       _footer_runs(base, new), ncols=len(modes), size=(11, 5), sharey=True)
    for ax, mode in zip(axes, modes):
        cats = [k for k in keys if k[2] == mode]
        series = [(side, [_side_interval(doc, metric, run.groups.get(k)) for k in cats])
                  for side, run in zip(SIDES, (base, new))]
        handles = _interval_bars(ax, [f"{wrap(p)}\n{m}" for p, m, _ in cats], series, ".1f", 100)
        ax.set_title(f"salt mode: {mode}")
        ax.set_xlabel("request path / modality")
        ax.set_ylim(0, 115)
    axes[0].set_ylabel("hit rate (%: cached / prompt tokens)")
    legend(fig, handles)
    return fig, (f"Prefix-cache hit rate per path, modality and salt mode, base vs new (mean "
                 f"over server starts of the repetitions' hit rates); error bars: {level:.0%} t "
                 f"interval over each side's server starts (as the change interval in the "
                 f"tables; none with one start, a line when every repetition agrees); n/a: the "
                 f"group is not in that side")


def _pass_group(side: Side, path: str, mode: str) -> Group:
    """The passes of ``path`` x ``mode`` (one per repetition and run) as a per-pass-metric
    group, each tagged with its run's server start."""
    passes = [(start, p) for start, run in enumerate(side.runs) for p in run.results["passes"]
              if p["path"] == path and p["salt_mode"] == mode]
    return Group(rows=[p for _, p in passes], starts=[start for start, _ in passes])


def throughputs(doc: dict, base: Side, new: Side) -> tuple[SubFigure, str] | None:
    """Request throughput per path, one panel per salt mode, base vs new, with a t interval
    over server starts (none with a single start)."""
    keys = _keys(base, new)
    if not keys:
        return None
    paths, modes = _ordered(k[0] for k in keys), _ordered(k[2] for k in keys)
    level, metric = doc["settings"]["confidence"], METRICS["request_throughput"]
    fig, axes = figure("Request throughput by path and salt mode: base vs new (geometric "
                       "mean over server starts)", _footer_runs(base, new), ncols=len(modes),
                       size=(10, 5), sharey=True)
    for ax, mode in zip(axes, modes):
        series = []
        for side, run in zip(SIDES, (base, new)):
            points = [_side_interval(doc, metric, _pass_group(run, p, mode)) for p in paths]
            series.append((f"{side} ({doc[side]['starts']} run(s), "
                           f"{doc[side]['repetitions']} repetition(s))", points))
        handles = _interval_bars(ax, [wrap(p) for p in paths], series, ".2f")
        ax.set_title(f"salt mode: {mode}")
        ax.set_xlabel("request path")
    axes[0].set_ylabel("requests/s (measure phase)")
    legend(fig, handles)
    single = [side for side in SIDES if doc[side]["starts"] < 2]
    note = (f"; {' and '.join(single)} had one server start: no interval there (compare sets "
            f"of runs)" if single else "")
    return fig, (f"Request throughput per path and salt mode, base vs new (geometric mean "
                 f"over server starts); error bars: {level:.0%} t interval over server starts "
                 f"(log scale){note}")


def _cell_text(row: dict) -> str:
    """A metric's change in a few characters (``+201%``, ``-3.1pp``), else its new value."""
    if row["change"] is not None:
        return (f"{row['change']:+.1f}pp" if row["change_unit"] == POINTS
                else f"{row['change'] * 100:+.0f}%")
    return "–" if row["new"] is None else format(row["new"], ".3g")


Cells = dict[tuple[str, str], tuple[str, str, bool]]  # (row, column) -> (state, text, gated)


def _metric_cells(doc: dict) -> Cells:
    """Per group row and metric column: state, change and whether it is gated; groups only
    one run has are ``n/a`` across."""
    cells: Cells = {}
    for r in doc["rows"]:
        row = " · ".join((r["path"], r["modality"], r["salt_mode"]))
        cells[row, METRICS[r["metric"]].label] = (r["state"], _cell_text(r), r["gated"])
    cols = _ordered(col for _, col in cells)
    for m in doc["missing"]:
        row = " · ".join((m["path"], m["modality"], m["salt_mode"]))
        cells.update({(row, col): (m["state"], f"not in\n{m['missing_in']}", True) for col in cols})
    return cells


def _isolation_cells(doc: dict) -> Cells:
    """Per isolation cell (path · modality): state and verdict, base -> new."""
    return {(f"{i['path']} · {i['modality']}", "verdict, base → new"):
            (i["state"], f"{i['base'] or '–'} →\n{i['new'] or '–'}", i["gated"])
            for i in doc["isolation"]}


def _heatmap(ax, cells: Cells) -> None:
    """``cells`` as coloured squares (hatched: not gated) with their text."""
    rows, cols = _ordered(r for r, _ in cells), _ordered(c for _, c in cells)
    for (row, col), (state, text, gated) in cells.items():
        x, y = cols.index(col), rows.index(row)
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=COMPARE_STYLE[state],
                               hatch="" if gated else "///", edgecolor="white", linewidth=1.5))
        ax.text(x, y, text, ha="center", va="center", fontsize=6.5, linespacing=0.9,
                color="white" if state in _DARK else "black")
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(cols)), cols, fontsize=7, rotation=30, ha="left",
                  rotation_mode="anchor")
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.grid(False)


def state_overview(doc: dict, base: Side, new: Side) -> tuple[SubFigure, str] | None:
    """Every group x metric coloured by its state and annotated with the change; beside it
    the isolation verdicts (base -> new) when both runs probed isolation."""
    panels = [c for c in (_metric_cells(doc), _isolation_cells(doc)) if c]
    if not panels:
        return None
    widths = [len(_ordered(c for _, c in cells)) for cells in panels]
    height = max(len(_ordered(r for r, _ in cells)) for cells in panels)
    fig, axes = figure("Where did it change? State of every metric per path, modality and "
                       "salt mode (cell text: change, new vs base)", _footer_runs(base, new),
                       ncols=len(panels), size=(12, 1.8 + 0.32 * height),
                       width_ratios=[w + 1.5 for w in widths])
    for ax, cells in zip(axes, panels):
        _heatmap(ax, cells)
    axes[0].set_ylabel("path · modality · salt mode")
    if len(panels) > 1:
        axes[1].set_ylabel("isolation cell: path · modality")
    handles = [Patch(facecolor=COMPARE_STYLE[s], edgecolor="black", label=s) for s in COMPARE_STATES]
    if any(not gated for cells in panels for _, _, gated in cells.values()):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                             label="hatched: not gated (threshold off / isolation = report)"))
    legend(fig, handles, ncol=len(handles))
    return fig, ("State of every metric per group: regressed / improved need an interval that "
                 "excludes no change and a change beyond the threshold, no significant change "
                 "an interval whose bad end is within the threshold, anything else is "
                 "inconclusive; n/a rows are groups only one run has"
                 + ("; right: the isolation verdict of each probed cell, base → new"
                    if len(panels) > 1 else ""))


#: Chart file name -> chart, in page order.
COMPARE_CHARTS: dict[str, Chart] = {
    "compare-states": state_overview,
    "compare-ttft-cdf": ttft_cdfs,
    "compare-hit-rate": hit_rates,
    "compare-throughput": throughputs,
}


def _sides_html(doc: dict) -> str:
    """Both sides and the allowed differences, worded as in the console."""
    items = [escape(ct.side_line(doc, side)) for side in SIDES]
    items += [f"allowed difference <code>{escape(k)}</code>: {escape(repr(a))} → {escape(repr(b))}"
              for k, (a, b) in doc["allowed_differences"].items()]
    s = doc["settings"]
    unsure = "reported" if s["inconclusive"] == REPORT else "fail the gate (exit 2)"
    items.append(f"intervals: {s['confidence']:.0%} Welch t over server starts (log scale for "
                 f"relative changes); thresholds: {escape(s.get('thresholds') or 'defaults')}; "
                 f"gated inconclusive metrics: {unsure}")
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _head_html(doc: dict) -> list[str]:
    """Verdict, both runs, their problems, what changed, then every metric folded away."""
    colour = {0: "#009E73", 1: COMPARE_STYLE[REGRESSED]}.get(doc["exit_code"],
                                                             COMPARE_STYLE[INCONCLUSIVE])
    problems, changed = ct.problems_table(doc), ct.decisive_table(doc)
    every = ct.changes_table(doc, title="Every metric")
    return [f'<p style="color:{colour};font-size:1.1em"><strong>{escape(ct.summary_line(doc))}'
            f"</strong></p>", _sides_html(doc), *([table_html(problems)] if problems.rows else []),
            table_html(changed) if changed.rows else
            f"<p>No metric {REGRESSED} or {IMPROVED}, and none gated was {INCONCLUSIVE}.</p>",
            f"<details><summary>Every metric ({len(every.rows)} rows)</summary>\n"
            f"{table_html(every)}\n</details>"]


def write_compare_html(doc: dict, base: Side, new: Side, out: Path) -> Path:
    """Write ``out/compare.html`` and its charts (``out/charts/*.png|svg``); the page's path.

    The page embeds the PNGs (it is self-contained) and links the SVGs."""
    figures = []
    for name, make in COMPARE_CHARTS.items():
        made = make(doc, base, new)
        if made is not None:
            figures.append(chart_html(save(made[0], out / "charts", name)[0], made[1]))
    body = [*_head_html(doc), "<h2>Charts</h2>", *figures]
    rest = ct.headline_tables(doc)[2:]  # isolation (base vs new) and n/a groups, when present
    if rest:
        body += ["<h2>Isolation and groups only one run has</h2>", *map(table_html, rest)]
    title = f"saltbench compare: {doc['base']['label']} → {doc['new']['label']}"
    path = Path(out) / COMPARE_HTML
    write_text(path, PAGE.substitute(title=escape(title), body="\n".join(body)))
    return path
