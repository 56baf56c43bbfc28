"""Isolation verdicts and exit codes (no engine)."""

from __future__ import annotations

from bench.verdicts.isolation import exit_code, uuid_verdict, verdict


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


def test_a_leak_outranks_an_error() -> None:
    leak_and_error = [{"name": "same/first", "error": "timeout"}, step("cross", "none", 32),
                      step("later", "none", 16), {"name": "last", "error": "HTTP 500: x"}]
    result, leaked, reason = verdict(leak_and_error)
    assert (result, leaked) == ("LEAK", 48)
    assert reason == ("cross: 32 cached tokens; later: 16 cached tokens; "
                      "same/first: timeout; last: HTTP 500: x")
    assert exit_code({"cells": [{"verdict": result}]}) == 1
    # An error outranks an under-hit.
    under_and_error = verdict([step("same", "full", 32, 96), {"name": "cross", "error": "t"}])
    assert under_and_error == ("ERROR", 0, "cross: t; same: 32/96 tokens")


def test_uuid_verdicts() -> None:
    def probe(cross: int | str, other: int | str = 0) -> dict:
        return {name: {"ok": False, "error": out} if isinstance(out, str)
                else {"ok": True, "cached_tokens": out}
                for name, out in (("x", other), ("cross", cross), ("same", 96))}

    assert uuid_verdict(probe(0), "cross") == ("ISOLATED", 0, None)
    assert uuid_verdict(probe("timeout"), "cross") == ("ERROR", 0, "cross: timeout")
    # A leak outranks a failed step; the reason lists it first.
    assert uuid_verdict(probe(64, "HTTP 500: x"), "cross") == (
        "LEAK", 64, "cross: 64 cached tokens; x: HTTP 500: x")


def test_exit_codes() -> None:
    def code(*cells: str, uuid: tuple[str, ...] = ()) -> int:
        return exit_code({"cells": [{"verdict": v} for v in cells],
                          "uuid_probe": [{"verdict": v} for v in uuid]})

    assert code("ISOLATED") == 0
    assert code("ISOLATED", "UNDER-HIT") == 1
    assert code("ERROR", "LEAK") == 1
    assert code("ERROR") == 2
    assert code() == 2
    assert code("ISOLATED", uuid=("ISOLATED",)) == 0
    assert code("ISOLATED", uuid=("LEAK",)) == 1
    assert code("ISOLATED", uuid=("ERROR",)) == 2
    assert code("ERROR", uuid=("LEAK",)) == 1
    assert exit_code({"cells": [{"verdict": "ISOLATED"}]}) == 0  # no uuid probe run
