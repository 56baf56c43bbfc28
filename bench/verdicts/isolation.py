"""Isolation verdicts: per step, per path x modality cell, per uuid probe, and the exit
code of a run.

A step's second request must get the full hit (same salt, or no salt twice) or nothing
(another salt); every first request is a first sighting and must get nothing.

One precedence, :data:`bench.vocab.VERDICTS` (LEAK > ERROR > UNDER-HIT > ISOLATED), ranks
the findings of a cell (:func:`ranked`) and the cells of a run (:func:`worst`), and the
exit code is the worst verdict's (:data:`EXIT_CODES`): the same findings give the same
code whether they are in one cell or several.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.vocab import ERROR, FULL, ISOLATED, LEAK, NONE, UNDER_HIT, VERDICTS

#: The exit code of a run whose worst verdict is this one.
EXIT_CODES = {LEAK: 1, ERROR: 2, UNDER_HIT: 1, ISOLATED: 0}


def ranked(leaks: bool, errors: bool, under_hits: bool) -> str:
    """The verdict of a cell or probe from what its steps found."""
    found = {LEAK: leaks, ERROR: errors, UNDER_HIT: under_hits}
    return next((v for v in VERDICTS if found.get(v)), ISOLATED)


def worst(verdicts: Iterable[str]) -> str | None:
    """The most severe of ``verdicts`` (others, e.g. n/a, are skipped); None if none."""
    present = set(verdicts)
    return next((v for v in VERDICTS if v in present), None)


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
    result = ranked(bool(leaks), bool(failed), bool(under))
    return result, sum(s["cached"] for s in leaks), reason if result != ISOLATED else None


def uuid_verdict(steps: dict[str, dict], cross: str) -> tuple[str, int, str | None]:
    """(verdict, leaked tokens, reason) of a uuid probe: any cached token in step ``cross``
    (another salt) is a LEAK, which outranks a failed step; the reason lists it first.

    What the same salt reuses under one uuid is vLLM's documented uuid behaviour, a
    finding rather than a salt verdict.
    """
    leaked = (steps[cross]["cached_tokens"] or 0) if steps[cross]["ok"] else 0
    failed = [f"{name}: {s['error']}" for name, s in steps.items() if not s["ok"]]
    reason = "; ".join([*([f"{cross}: {leaked} cached tokens"] if leaked else []), *failed])
    result = ranked(bool(leaked), bool(failed), False)
    return result, leaked, reason if result != ISOLATED else None


def exit_code(isolation: dict) -> int:
    """The exit code of the worst verdict of every cell, routed cell and uuid probe
    (:data:`EXIT_CODES`: 0 all isolated, 1 a leak or an under-hit, 2 an error). No judged
    cell (none ran, or the server can serve none) counts as an ERROR."""
    verdicts = [j["verdict"] for j in [*isolation["cells"], *isolation.get("routed", []),
                                       *isolation.get("uuid_probe", [])]]
    if worst(c["verdict"] for c in isolation["cells"]) is None:
        verdicts.append(ERROR)
    return EXIT_CODES[worst(verdicts) or ERROR]
