"""A comparison of two sides (a run directory, or a directory of runs each on its own server
start): read, checked for comparability, judged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.compare.comparability import check
from bench.compare.pair import compare_runs
from bench.compare.samples import Side, load_side, paired
from bench.compare.thresholds import REPORT, load_thresholds


def compare_dirs(base_dir: Path | list[Path], new_dir: Path | list[Path],
                 thresholds_path: Path | None, allow: list[str],
                 allow_inconclusive: bool = False) -> tuple[dict, Side, Side]:
    """The comparison document and the two sides it read (each a run directory, a directory
    of runs, or a list of run directories). ``allow_inconclusive``: gated inconclusive
    metrics are reported, not failed (``inconclusive = "report"``)."""
    thresholds = load_thresholds(thresholds_path)  # bad input fails before any work
    base, new = load_side(base_dir), load_side(new_dir)
    if paired(base, new):
        thresholds = load_thresholds(thresholds_path, ab=True)
    if allow_inconclusive:
        thresholds.settings = replace(thresholds.settings, inconclusive=REPORT)
    allowed = check(base.results["metadata"], new.results["metadata"], allow)
    return compare_runs(base, new, thresholds, allowed), base, new
