"""Isolation verdicts: per step, per path x modality cell, and the exit code of a run.

A step's second request must get the full hit (same salt, or no salt twice) or nothing
(another salt); every first request is a first sighting and must get nothing.
"""

from __future__ import annotations

from bench.vocab import ERROR, FULL, ISOLATED, LEAK, NONE, UNDER_HIT


def step_ok(step: dict) -> bool:
    """Whether one judged request got what its rule says."""
    if step.get("error"):
        return False
    return step["cached"] == 0 if step["rule"] == NONE else step["cached"] >= step["expected"]


def verdict(steps: list[dict]) -> tuple[str, int, str | None]:
    """(verdict, leaked tokens, reason) from judged step results."""
    failed = [s for s in steps if s.get("error")]
    if failed:
        return ERROR, 0, f"{failed[0]['name']}: {failed[0]['error']}"
    leaks = [s for s in steps if s["rule"] == NONE and s["cached"] > 0]
    if leaks:
        return LEAK, sum(s["cached"] for s in leaks), ", ".join(
            f"{s['name']}: {s['cached']} cached tokens" for s in leaks)
    under = [s for s in steps if s["rule"] == FULL and s["cached"] < s["expected"]]
    if under:
        return UNDER_HIT, 0, ", ".join(
            f"{s['name']}: {s['cached']}/{s['expected']} tokens" for s in under)
    return ISOLATED, 0, None


def exit_code(cells: list[dict]) -> int:
    """0: all isolated; 1: a leak or an under-hit; 2: could not run."""
    verdicts = {c["verdict"] for c in cells}
    if verdicts & {LEAK, UNDER_HIT}:
        return 1
    return 2 if ERROR in verdicts or not cells else 0
