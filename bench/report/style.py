"""How the report looks: number formats, a colour-blind-safe palette, figures with footers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # headless, before pyplot is imported anywhere
import matplotlib.pyplot as plt  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from bench.report.load import Run

#: Okabe-Ito, in an order whose neighbours differ in lightness too (greyscale prints).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
           "#000000")
HATCHES = ("", "///", "...", "xxx", "\\\\\\", "ooo", "---", "+++")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
FOOTER_KEYS = ("run id", "vLLM", "model", "block size", "machine", "date")

plt.rcParams.update({
    "font.size": 9, "axes.titlesize": 10, "figure.titlesize": 12, "legend.fontsize": 8,
    "axes.grid": True, "grid.alpha": 0.3, "axes.axisbelow": True, "hatch.linewidth": 0.6,
    "svg.hashsalt": "saltbench", "svg.fonttype": "none",
})


def fmt(value: float | None, spec: str) -> str:
    """``value`` formatted by ``spec``, or an en dash when missing."""
    return "–" if value is None else format(value, spec)


def ms(value: float | None) -> str:
    return fmt(value, ".1f")


def rate(value: float | None) -> str:
    return fmt(value, ".3f")


def tput(value: float | None) -> str:
    return fmt(value, ".2f")


def series_style(i: int) -> dict:
    """Colour, hatch, marker and line style of the ``i``-th series (all four differ)."""
    return {"color": PALETTE[i % len(PALETTE)], "hatch": HATCHES[i % len(HATCHES)],
            "marker": MARKERS[i % len(MARKERS)], "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def series_label(runs: list[Run], run: Run, name: str) -> str:
    """``name``, prefixed by the run's label when there are several runs."""
    return f"{run.label} · {name}" if len(runs) > 1 else name


def footer_text(runs: list[Run]) -> str:
    return "\n".join("  ·  ".join(f"{k} {run.meta()[k]}" for k in FOOTER_KEYS) for run in runs)


def figure(title: str, runs: list[Run], ncols: int = 1, nrows: int = 1,
           size: tuple[float, float] = (10, 5), **subplot_kw) -> tuple[Figure, list]:
    """A titled figure with a metadata footer; its axes as a flat list."""
    lines = len(runs)
    footer_in = 0.2 + 0.16 * lines
    fig = plt.figure(figsize=(size[0], size[1] + footer_in), layout="constrained")
    frac = footer_in / (size[1] + footer_in)
    fig.get_layout_engine().set(rect=(0, frac, 1, 1 - frac))
    fig.suptitle(title, fontweight="bold")
    fig.text(0.01, 0.01, footer_text(runs), fontsize=6.5, color="#444444", va="bottom",
             ha="left", wrap=True)
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig, list(axes.flat)


def legend(fig: Figure, handles: list, ncol: int | None = None) -> None:
    """One legend for the figure, below the axes, above the footer."""
    fig.legend(handles=handles, loc="outside lower center",
               ncol=ncol or min(len(handles), 4), frameon=False)


def wrap(category: str) -> str:
    """A tick label broken after its first hyphen (``generate-\nparts``), so neighbours fit."""
    return category.replace("-", "-\n", 1)


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.svg into ``out_dir``; close the figure."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    fig.savefig(paths[0], dpi=150, metadata={"Software": None})
    fig.savefig(paths[1], metadata={"Date": None})
    plt.close(fig)
    return paths
