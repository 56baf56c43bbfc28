"""The new run's values in the format CI benchmark dashboards read
(github-action-benchmark's ``customSmallerIsBetter`` / ``customBiggerIsBetter``): a list
of ``{name, unit, value, range, extra}``."""

from __future__ import annotations

from bench.compare.pair import format_change
from bench.registry import HIGHER, METRICS, POINTS

SMALLER, BIGGER = "customSmallerIsBetter", "customBiggerIsBetter"


def _entry(row: dict) -> dict:
    points = row["change_unit"] == POINTS
    scale = 100.0 if points else 1.0  # rates as percentages
    entry = {"name": f"{row['metric']} {row['path']}/{row['modality']}/{row['salt_mode']}",
             "unit": row["unit"], "value": row["new"] * scale}
    if row.get("low") is not None:
        half = (row["high"] - row["low"]) / 2
        entry["range"] = f"± {half if points else half * abs(row['base']):.4g}"
        entry["extra"] = f"vs base {row['base'] * scale:.4g}: {format_change(row)} ({row['state']})"
    return entry


def dashboard(doc: dict) -> dict[str, list[dict]]:
    """Entries per dashboard tool: smaller-is-better and bigger-is-better."""
    out: dict[str, list[dict]] = {SMALLER: [], BIGGER: []}
    for row in doc["rows"]:
        if row["new"] is not None:
            kind = BIGGER if METRICS[row["metric"]].better == HIGHER else SMALLER
            out[kind].append(_entry(row))
    return out
