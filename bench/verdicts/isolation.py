"""Isolation verdicts: per step, per path x modality cell, per uuid probe, and the exit
code of a run.

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
    """(verdict, leaked tokens, reason) from judged step results.

    LEAK > ERROR > UNDER-HIT > ISOLATED: a failed request never hides a leak in another
    step. The reason lists leaks, then errors, then under-hits.
    """
    ran = [s for s in steps if not s.get("error")]
    leaks = [s for s in ran if s["rule"] == NONE and s["cached"] > 0]
    failed = [s for s in steps if s.get("error")]
    under = [s for s in ran if s["rule"] == FULL and s["cached"] < s["expected"]]
    reason = "; ".join([*(f"{s['name']}: {s['cached']} cached tokens" for s in leaks),
                        *(f"{s['name']}: {s['error']}" for s in failed),
                        *(f"{s['name']}: {s['cached']}/{s['expected']} tokens" for s in under)])
    if leaks:
        return LEAK, sum(s["cached"] for s in leaks), reason
    if failed:
        return ERROR, 0, reason
    return (UNDER_HIT, 0, reason) if under else (ISOLATED, 0, None)


def uuid_verdict(steps: dict[str, dict], cross: str) -> tuple[str, int, str | None]:
    """(verdict, leaked tokens, reason) of a uuid probe: any cached token in step ``cross``
    (another salt) is a LEAK, which outranks a failed step; the reason lists it first.

    What the same salt reuses under one uuid is vLLM's documented uuid behaviour, a
    finding rather than a salt verdict.
    """
    leaked = (steps[cross]["cached_tokens"] or 0) if steps[cross]["ok"] else 0
    failed = [f"{name}: {s['error']}" for name, s in steps.items() if not s["ok"]]
    reason = "; ".join([*([f"{cross}: {leaked} cached tokens"] if leaked else []), *failed])
    if leaked:
        return LEAK, leaked, reason
    return (ERROR, 0, reason) if failed else (ISOLATED, 0, None)


def exit_code(isolation: dict) -> int:
    """0: all isolated; 1: a leak (cell, routed cell or uuid probe) or an under-hit; 2: could
    not run."""
    verdicts = {j["verdict"] for j in [*isolation["cells"], *isolation.get("routed", []),
                                       *isolation.get("uuid_probe", [])]}
    if verdicts & {LEAK, UNDER_HIT}:
        return 1
    return 2 if ERROR in verdicts or not isolation["cells"] else 0
