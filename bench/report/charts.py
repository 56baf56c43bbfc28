"""The report's charts: each function takes the runs and returns a figure (or ``None``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from matplotlib.figure import SubFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from bench.report.load import Run
from bench.report.style import figure, legend, series_label, series_style, wrap
from bench.report.tables import at
from bench.stats import DISTINGUISHABLE, NO_EVIDENCE
from bench.verdicts.boundary import boundary_rows, per_cell, policy
from bench.vocab import (
    CHANNELS,
    KV,
    MODALITY_LABELS,
    NOT_AVAILABLE,
    NOT_DETECTED,
    TIMING,
    VERDICT_STYLE,
)

#: Modalities in a fixed reading order (anything else after them, as first seen).
_MODALITY_ORDER = {m: i for i, m in enumerate(MODALITY_LABELS)}


def _ordered(items) -> list:
    return list(dict.fromkeys(items))


def _by_modality(cats: list, key=lambda c: c) -> list:
    """Stable sort that puts modalities in reading order, keeping the other order."""
    return sorted(cats, key=lambda c: _MODALITY_ORDER.get(key(c), len(_MODALITY_ORDER)))


def _paths(runs: list[Run]) -> list[str]:
    return _ordered(p["path"] for run in runs for p in run.results["passes"])


def _salt_modes(runs: list[Run]) -> list[str]:
    return _ordered(p["salt_mode"] for run in runs for p in run.results["passes"])


def _pass(run: Run, path: str, salt_mode: str) -> dict:
    return next((p for p in run.results["passes"]
                 if p["path"] == path and p["salt_mode"] == salt_mode), {})


def _ttfts(run: Run, hit: bool | None = None, **match) -> np.ndarray:
    """Sorted TTFTs (ms) of successful measured requests whose fields equal ``match``;
    only cache hits (``cached_tokens > 0``) or misses if ``hit`` is given."""
    return np.sort([r["ttft_ms"] for r in run.records
                    if r.get("ok") and r.get("ttft_ms") is not None
                    and all(r.get(k) == v for k, v in match.items())
                    and (hit is None or bool(r.get("cached_tokens")) == hit)]).astype(float)


def _dodge(n: int, width: float = 0.8) -> tuple[np.ndarray, float]:
    """Offsets of ``n`` side-by-side series within one category, and each one's width."""
    step = width / n
    return (np.arange(n) - (n - 1) / 2) * step, step


def _bars(ax, categories: list[str], series: list[tuple[str, list]], spec: str) -> list:
    """Dodged bars, one colour + hatch per series, values written on top; legend handles."""
    offsets, width = _dodge(len(series))
    x = np.arange(len(categories))
    handles = []
    for i, ((label, values), off) in enumerate(zip(series, offsets)):
        st = series_style(i)
        heights = [np.nan if v is None else v for v in values]
        bars = ax.bar(x + off, heights, width, color=st["color"], hatch=st["hatch"],
                      edgecolor="black", linewidth=0.5, label=label)
        ax.bar_label(bars, [("" if v is None else format(v, spec)) for v in values],
                     fontsize=6.5, padding=2, rotation=90 if len(series) > 2 else 0)
        handles.append(bars)
    ax.set_xticks(x, [wrap(c) for c in categories])
    ax.margins(y=0.18)
    return handles


def hit_rates(runs: list[Run]) -> SubFigure:
    """(1) Prefix-cache hit rate by path, one panel per salt mode, requests vs counters."""
    paths, modes = _paths(runs), _salt_modes(runs)
    fig, axes = figure("Prefix-cache hit rate by request path and salt mode", runs,
                       ncols=len(modes), sharey=True)
    sources = (("from requests", "hit_rate_requests"), ("from server counters",
                                                        "hit_rate_counters"))
    for ax, mode in zip(axes, modes):
        series = [(series_label(runs, run, name), [_pass(run, p, mode).get(key) for p in paths])
                  for run in runs for name, key in sources]
        handles = _bars(ax, paths, series, ".3f")
        ax.set_title(f"salt mode: {mode}")
        ax.set_xlabel("request path")
        ax.set_ylim(0, 1.15)
    axes[0].set_ylabel("hit rate (cached / prompt tokens)")
    legend(fig, handles)
    return fig


def ttft_cdf(runs: list[Run]) -> SubFigure:
    """(2) Empirical CDF of TTFT per path: cache hits versus misses."""
    paths = _paths(runs)
    ncols = min(len(paths), 2)
    fig, axes = figure("TTFT distribution per request path: prefix-cache hits vs misses "
                       "(measure phase, all salt modes)", runs, ncols=ncols,
                       nrows=-(-len(paths) // ncols), size=(10, 6.5), sharex=True, sharey=True)
    handles = []
    for ax, path in zip(axes, paths):
        handles, counts = [], []
        for r_i, run in enumerate(runs):
            for k, (name, hit) in enumerate((("hits (cached > 0)", True),
                                             ("misses (cached = 0)", False))):
                st = series_style(2 * r_i + k)
                values = _ttfts(run, hit, path=path)
                counts.append(len(values))
                y = np.arange(1, len(values) + 1) / max(len(values), 1)
                (line,) = ax.step(values, y, where="post", color=st["color"],
                                  linestyle=st["linestyle"], marker=st["marker"],
                                  markevery=max(1, len(values) // 8), markersize=4,
                                  label=series_label(runs, run, name))
                handles.append(line)
        pairs = ", ".join(f"{h}/{m}" for h, m in zip(counts[::2], counts[1::2]))
        ax.set_title(f"{path}  (n hit/miss: {pairs})")
        ax.set_ylim(0, 1.02)
    for ax in axes[len(paths):]:
        ax.set_visible(False)
    for ax in axes[-ncols:]:
        ax.set_xlabel("TTFT (ms)")
    for ax in axes[::ncols]:
        ax.set_ylabel("fraction of requests ≤ TTFT")
    legend(fig, handles)
    return fig


def ttft_groups(runs: list[Run]) -> SubFigure:
    """(3) TTFT per path × modality × salt mode: median, whiskers p10–p90."""
    cats = _ordered((r["path"], r["modality"]) for run in runs for r in run.records)
    paths = _ordered(p for p, _ in cats)
    cats = sorted(_by_modality(cats, key=lambda c: c[1]), key=lambda c: paths.index(c[0]))
    series = [(run, mode) for run in runs for mode in _salt_modes(runs)]
    fig, (ax,) = figure("TTFT by request path, modality and salt mode "
                        "(marker: median; whiskers: p10–p90; n per salt mode)", runs, size=(11, 5))
    offsets, _ = _dodge(len(series), 0.6)
    handles = []
    for i, ((run, mode), off) in enumerate(zip(series, offsets)):
        st = series_style(i)
        stats = [np.percentile(v, (10, 50, 90)) if len(v) else (np.nan,) * 3
                 for v in (_ttfts(run, path=p, modality=m, salt_mode=mode) for p, m in cats)]
        lo, med, hi = np.array(stats, dtype=float).T
        handles.append(ax.errorbar(np.arange(len(cats)) + off, med, yerr=[med - lo, hi - med],
                                   fmt=st["marker"], color=st["color"], capsize=3,
                                   markersize=6, linewidth=1.2,
                                   label=series_label(runs, run, f"salt mode: {mode}")))
    n = [max(len(_ttfts(run, path=p, modality=m, salt_mode=mode)) for run, mode in series)
         for p, m in cats]
    ax.set_xticks(np.arange(len(cats)), [f"{wrap(p)}\n({m}, n={k})" for (p, m), k in zip(cats, n)])
    ax.set_xlabel("request path / modality")
    ax.set_ylabel("TTFT (ms)")
    ax.set_ylim(bottom=0)
    legend(fig, handles)
    return fig


def throughput(runs: list[Run]) -> SubFigure:
    """(4) Request and total-token throughput per path and salt mode."""
    paths, modes = _paths(runs), _salt_modes(runs)
    fig, axes = figure("Throughput by request path and salt mode (measure phase)", runs,
                       ncols=2)
    panels = (("request_throughput", "requests/s", ".1f"),
              ("total_token_throughput", "total tokens/s (prompt + output)", ".0f"))
    for ax, (key, unit, spec) in zip(axes, panels):
        series = [(series_label(runs, run, f"salt mode: {mode}"),
                   [_pass(run, p, mode).get(key) for p in paths])
                  for run in runs for mode in modes]
        handles = _bars(ax, paths, series, spec)
        ax.set_title(unit.split(" (")[0])
        ax.set_xlabel("request path")
        ax.set_ylabel(unit)
    legend(fig, handles)
    return fig


def _isolated(runs: list[Run]) -> list[Run]:
    return [run for run in runs if run.isolation]


def _boundary_label(row: dict, channel: str) -> str:
    """A heatmap cell's text: the verdict and its figure (leaked tokens, AUC)."""
    verdict = row[channel]
    if channel == KV and verdict != NOT_AVAILABLE:
        return f"{verdict}\nleaked: {row.get('leaked_tokens') or 0} tokens"
    if channel == TIMING and row.get("auc") is not None:
        return f"{verdict}\nAUC {row['auc']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"
    return verdict.replace(" ", "\n", 1) if verdict == NOT_DETECTED else verdict


def isolation_heatmap(runs: list[Run]) -> SubFigure | None:
    """(5) The tenant boundary per path × modality: one panel per channel (KV cache, media
    content, timing), verdicts coloured and annotated; the panels the run's policy fails on
    say so in their titles."""
    iso_runs = _isolated(runs)
    if not iso_runs:
        return None
    fig, axes = figure("Tenant boundary by request path and modality", iso_runs,
                       ncols=len(CHANNELS), nrows=len(iso_runs),
                       size=(15.0, 4.2 * len(iso_runs)))
    for r, run in enumerate(iso_runs):
        rows = per_cell(boundary_rows(run.isolation))
        paths = _ordered(row["path"] for row in rows)
        mods = _by_modality(_ordered(row["modality"] for row in rows))
        gated = policy(run.isolation)
        for ax, channel in zip(axes[r * len(CHANNELS):], CHANNELS):
            for row in rows:
                colour, hatch, ink = VERDICT_STYLE.get(row[channel], ("#FFFFFF", "", "black"))
                x, y = mods.index(row["modality"]), paths.index(row["path"])
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour, hatch=hatch,
                                       edgecolor="white", linewidth=2))
                ax.text(x, y, _boundary_label(row, channel), ha="center", va="center", fontsize=7, color=ink,
                        fontweight="bold",
                        bbox={"facecolor": colour, "edgecolor": "none", "pad": 1.5})
            ax.set_xlim(-0.5, len(mods) - 0.5)
            ax.set_ylim(len(paths) - 0.5, -0.5)
            ax.set_xticks(range(len(mods)), mods)
            ax.set_yticks(range(len(paths)), paths if channel == KV else [""] * len(paths))
            ax.grid(False)
            ax.set_xlabel("modality")
            title = f"{channel} ({'fails the run' if channel in gated else 'reported'})"
            ax.set_title(f"{run.label}: {title}" if len(iso_runs) > 1 else title, fontsize=9)
        axes[r * len(CHANNELS)].set_ylabel("request path")
    shown = {row[c] for run in iso_runs for row in boundary_rows(run.isolation) for c in CHANNELS}
    legend(fig, [Patch(facecolor=c, hatch=h, edgecolor="black", label=v)
                 for v, (c, h, _) in VERDICT_STYLE.items() if v in shown])
    return fig


def side_channel(runs: list[Run]) -> SubFigure | None:
    """(6) Forest plot of side-channel AUCs with bootstrap intervals; filled markers are
    rows whose Holm-adjusted one-sided test found the groups distinguishable."""
    iso_runs = [run for run in _isolated(runs)
                if any(s.get("auc") is not None for s in run.isolation.get("side_channel", []))]
    if not iso_runs:
        return None
    rows = [(run, s) for run in iso_runs for s in run.isolation["side_channel"]
            if s.get("auc") is not None]  # not "too few samples", and tested
    kinds = _ordered(s["kind"] for _, s in rows)
    fig, (ax,) = figure("Timing side channel: can TTFT tell the two groups apart? "
                        "(AUC with 95% bootstrap interval)", iso_runs,
                        size=(10, 2.2 + 0.35 * len(rows)))
    ax.axvline(0.5, color="black", linestyle="--", linewidth=1)
    for y, (_, s) in enumerate(rows):
        st = series_style(kinds.index(s["kind"]))
        found = s.get("finding") == DISTINGUISHABLE
        ax.errorbar(s["auc"], y, xerr=[[s["auc"] - s["ci_low"]], [s["ci_high"] - s["auc"]]],
                    fmt=st["marker"], color=st["color"], capsize=3, markersize=7,
                    markerfacecolor=st["color"] if found else "white")
        p = s.get("p_adjusted")
        ax.text(1.02, y, f"{s['auc']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]  "
                         f"n {s.get('n_a', '?')}/{s.get('n_b', '?')}  "
                         f"Holm p {'–' if p is None else format(p, '.2g')}",
                transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    labels = [series_label(iso_runs, run, f"{at(s)} · {s['modality']} · {s['kind']}")
              for run, s in rows]
    ax.set_yticks(range(len(rows)), labels)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(-0.02, 1.02)  # room for markers at 0 and 1
    ax.set_xlabel("paired AUC = T+/(T+ + T-) of TTFT a - TTFT b  (0.5 = no difference)")
    ax.set_ylabel("path · modality · comparison")
    handles = [Line2D([], [], linestyle="", marker=series_style(i)["marker"],
                      color=series_style(i)["color"], label=k) for i, k in enumerate(kinds)]
    handles += [Line2D([], [], linestyle="", marker="o", color="grey",
                       label=f"{DISTINGUISHABLE} (Holm p ≤ α)"),
                Line2D([], [], linestyle="", marker="o", color="grey", markerfacecolor="white",
                       label=NO_EVIDENCE),
                Line2D([], [], color="black", linestyle="--", label="chance (AUC 0.5)")]
    legend(fig, handles, ncol=min(len(handles), 5))
    return fig


#: Chart file name -> (function, caption), in report order.
CHARTS: dict[str, tuple[Callable[[list[Run]], SubFigure | None], str]] = {
    "hit-rate": (hit_rates, "Prefix-cache hit rate by path and salt mode"),
    "ttft-cdf": (ttft_cdf, "TTFT distribution, hits vs misses"),
    "ttft-groups": (ttft_groups, "TTFT by path, modality and salt mode"),
    "throughput": (throughput, "Throughput by path and salt mode"),
    "isolation": (isolation_heatmap, "Tenant boundary verdicts"),
    "side-channel": (side_channel, "Side-channel AUCs"),
}
