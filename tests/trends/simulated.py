"""Simulated series of entries with known steps: each entry one or more server starts of a
per-pass metric, each start off by its own lognormal offset."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.compare.samples import Group, Side
from bench.trends.series import Entry

KEY = ("chat", "image", "none")


def entry(index: int, starts: list[list[float]], metric: str = "request_throughput") -> Entry:
    """An entry whose server starts gave these repetition values."""
    g = Group()
    for s, reps in enumerate(starts):
        for r, v in enumerate(reps):
            g.rows.append({metric: v, "repetition": r})
            g.requests.append({})
            g.ids.append([])
            g.starts.append(s)
            g.units.append((s, 0, r))
    return Entry(Side(Path(f"entry-{index}"), [], {KEY: g}), index)


def series(rng: np.random.Generator, n: int = 20, step_at: int | None = None,
           step: float = 0.0, start_sd: float = 0.05, rep_sd: float = 0.01, starts: int = 1,
           reps: int = 2, base: float = 10.0) -> list[Entry]:
    """``n`` entries; from ``step_at`` on the value is ``1 + step`` times higher."""
    out = []
    for i in range(n):
        level = base * (1 + step if step_at is not None and i >= step_at else 1.0)
        out.append(entry(i, [[float(level * np.exp(off + rng.normal(0, rep_sd)))
                              for _ in range(reps)]
                             for off in rng.normal(0, start_sd, starts)]))
    return out
