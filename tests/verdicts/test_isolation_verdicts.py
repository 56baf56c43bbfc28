"""Isolation verdicts and exit codes (no engine)."""

from __future__ import annotations

from bench.verdicts.isolation import exit_code, verdict


def step(name: str, rule: str, cached: int, expected: int = 0) -> dict:
    return {"name": name, "rule": rule, "cached": cached, "expected": expected}


def test_verdicts() -> None:
    ok = [step("same", "full", 96, 96), step("cross", "none", 0)]
    assert verdict(ok) == ("ISOLATED", 0, None)
    leak = verdict([step("same", "full", 96, 96), step("cross", "none", 64)])
    assert leak[0] == "LEAK" and leak[1] == 64 and "cross: 64" in leak[2]
    under = verdict([step("same", "full", 32, 96), step("cross", "none", 0)])
    assert under[0] == "UNDER-HIT" and "32/96" in under[2]
    error = verdict([step("same", "full", 96, 96), {"name": "cross", "error": "HTTP 500: x"}])
    assert error == ("ERROR", 0, "cross: HTTP 500: x")
    # A leak outranks an under-hit: it is what the suite exists to catch.
    assert verdict([step("same", "full", 0, 96), step("cross", "none", 32)])[0] == "LEAK"


def test_exit_codes() -> None:
    assert exit_code([{"verdict": "ISOLATED"}]) == 0
    assert exit_code([{"verdict": "ISOLATED"}, {"verdict": "UNDER-HIT"}]) == 1
    assert exit_code([{"verdict": "ERROR"}, {"verdict": "LEAK"}]) == 1
    assert exit_code([{"verdict": "ERROR"}]) == 2
    assert exit_code([]) == 2
