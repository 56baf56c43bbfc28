"""When an A/B runs more start pairs than planned (issue 23).

An A/B judged after its planned start pairs whose gate cannot judge only because gated
metric rows are inconclusive (no gated regression, no isolation lost or unsure, no problem
in a run, inconclusive rows failing the gate) runs one more start pair and is judged again,
up to a limit; it stops at the first judgement that passes or fails. Simulated at the noise
measured here (tests/benchmarks/ab_design.py, docs/ab.md), it kept the false-alarm rate
and made "cannot judge" rare. An underpowered row is
one whose interval is too wide for its threshold: a start pair more narrows it, where
failing would send a CI user to run the whole A/B again.
"""

from __future__ import annotations

from bench.vocab import INCONCLUSIVE, REGRESSED


def underpowered_only(rows: list[dict]) -> bool:
    """No gated row regressed and at least one is inconclusive."""
    gated = [r for r in rows if r["gated"]]
    return (not any(r["state"] == REGRESSED for r in gated)
            and any(r["state"] == INCONCLUSIVE for r in gated))


def more_starts_help(doc: dict) -> bool:
    """Whether comparison ``doc`` (an A/B's) cannot judge only because of gated rows a
    start pair more may power (see the module docstring)."""
    s = doc["summary"]
    unsure = sum(r["gated"] and r["state"] == INCONCLUSIVE for r in doc["rows"])
    return (doc.get("ab") is not None and s["gate failures"] == 0
            and s["base run problems"] == 0 and s["cannot judge"] == unsure
            and s["gated inconclusive"] == unsure and underpowered_only(doc["rows"]))
