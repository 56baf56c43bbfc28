"""KV-cache and media-content verdicts: per step, per path x modality cell, per uuid probe.

A step's second request must get the full hit (same salt, or no salt twice) or nothing
(another salt); every first request is a first sighting and must get nothing.

One precedence, :data:`bench.vocab.VERDICTS` (LEAK > ERROR > UNDER-HIT > ISOLATED), ranks
the findings of a cell (:func:`ranked`) and the cells of a run (:func:`worst`); a run's
exit code is :mod:`bench.verdicts.boundary`'s.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.vocab import ERROR, FULL, ISOLATED, LEAK, NONE, SUBSTITUTED, UNDER_HIT, VERDICTS

#: The uuid probe's steps: X under salt A; Y (another item, of another size) under X's uuid
#: with salt B (another tenant) and with salt A; Y under salt A without a uuid (control).
X_STEP, CROSS_SALT, SAME_SALT, CONTROL_STEP = (
    "x-salt-a", "y-salt-b-same-uuid", "y-salt-a-same-uuid", "y-salt-a-no-uuid")


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


def content_verdict(steps: dict[str, dict]) -> tuple[str, list[str], str | None]:
    """(verdict, evidence, reason) of the media content across salts in a uuid probe.

    SUBSTITUTED when Y under another salt was given X's processed media: a multimodal-cache
    hit on that request, or its prompt of X's size while Y alone has another size. Without
    either, ISOLATED when the evidence could have shown (the cross step ran, and counters
    or differing sizes were there to see it); else ERROR (fail closed).
    """
    x, cross, control = steps[X_STEP], steps[CROSS_SALT], steps[CONTROL_STEP]
    evidence = []
    if cross["ok"] and (cross.get("mm_cache_hits") or 0) > 0:
        evidence.append(f"{cross['mm_cache_hits']:.0f} multimodal-cache hit(s)")
    sizes_differ = x["ok"] and control["ok"] and x["prompt_tokens"] != control["prompt_tokens"]
    if sizes_differ and cross["ok"] and cross["prompt_tokens"] == x["prompt_tokens"]:
        evidence.append(f"a prompt of {cross['prompt_tokens']} tokens, the other item's size "
                        f"(its own: {control['prompt_tokens']})")
    if evidence:
        return SUBSTITUTED, evidence, f"{CROSS_SALT}: " + "; ".join(evidence)
    if not cross["ok"]:
        return ERROR, [], f"{CROSS_SALT}: {cross['error']}"
    if not sizes_differ and cross.get("mm_cache_hits") is None:
        failed = [f"{name}: {s['error']}" for name, s in steps.items() if not s["ok"]]
        return ERROR, [], "; ".join(failed) or (
            "cannot tell: both items have one prompt size and the server reports no "
            "multimodal-cache counters")
    return ISOLATED, [], None
