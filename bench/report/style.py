"""How the report looks: number formats, a colour-blind-safe palette, figures with footers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # headless, before pyplot is imported anywhere
import matplotlib.pyplot as plt  # noqa: E402

from bench.docio import replacing  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure

    from bench.report.load import Run

#: Okabe-Ito, in an order whose neighbours differ in lightness too (greyscale prints).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000")
HATCHES = ("", "///", "...", "xxx", "\\\\\\", "ooo", "---", "+++")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
FOOTER_LINES = (("run id", "vLLM", "model", "block size"), ("machine", "date", "workload"))

plt.rcParams.update({
    "font.size": 9, "axes.titlesize": 10, "figure.titlesize": 12, "legend.fontsize": 8,
    "axes.grid": True, "grid.alpha": 0.3, "axes.axisbelow": True, "hatch.linewidth": 0.6,
    "svg.hashsalt": "saltbench", "svg.fonttype": "none",
})


def series_style(i: int) -> dict:
    """Colour, hatch, marker and line style of the ``i``-th series (all four differ)."""
    return {"color": PALETTE[i % len(PALETTE)], "hatch": HATCHES[i % len(HATCHES)],
            "marker": MARKERS[i % len(MARKERS)], "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def series_label(runs: list[Run], run: Run, name: str) -> str:
    """``name``, prefixed by the run's label when there are several runs."""
    return f"{run.label} · {name}" if len(runs) > 1 else name


def footer_text(runs: list[Run]) -> str:
    """Two lines of identifying metadata per run (labelled when there are several runs)."""
    lines = []
    for run in runs:
        meta = run.meta()
        lines += [series_label(runs, run, "  ·  ".join(f"{k} {meta[k]}" for k in keys))
                  for keys in FOOTER_LINES]
    return "\n".join(lines)


def figure(title: str, runs: list[Run], ncols: int = 1, nrows: int = 1,
           size: tuple[float, float] = (10, 5), **subplot_kw) -> tuple[SubFigure, list]:
    """A titled (sub)figure above a metadata footer; its axes as a flat list."""
    footer_in = 0.15 + 0.14 * len(FOOTER_LINES) * len(runs)
    root = plt.figure(figsize=(size[0], size[1] + footer_in), layout="constrained")
    fig, foot = root.subfigures(2, 1, height_ratios=(size[1], footer_in))
    fig.suptitle(title, fontweight="bold")
    foot.text(0.01, 0.5, footer_text(runs), fontsize=6.5, color="#444444", va="center")
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig, list(axes.flat)


def legend(fig: SubFigure, handles: list, ncol: int | None = None) -> None:
    """One legend for the figure, below the axes, above the footer."""
    rows = -(-len(handles) // 4)  # fill whole columns: each run's series stay together
    fig.legend(handles=handles, loc="outside lower center",
               ncol=ncol or -(-len(handles) // rows), frameon=False)


def wrap(category: str) -> str:
    """A tick label broken after its first hyphen (``generate-\nparts``), so neighbours fit."""
    return category.replace("-", "-\n", 1)


def save(fig: Figure | SubFigure, out_dir: Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.svg into ``out_dir`` atomically; close the figure."""
    fig = fig.figure  # the root figure of a subfigure
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    with replacing(paths[0]) as png, replacing(paths[1]) as svg:
        fig.savefig(png, format="png", dpi=150, metadata={"Software": None})
        fig.savefig(svg, format="svg", metadata={"Date": None})
    plt.close(fig)
    return paths
