"""Isolation verdicts and exit codes (no engine)."""

from __future__ import annotations

from bench.isolation.replicas import routed_verdict
from bench.verdicts.boundary import exit_code
from bench.verdicts.isolation import uuid_verdict, verdict


def step(name: str, rule: str, cached: int, expected: int = 0) -> dict:
    return {"name": name, "rule": rule, "cached": cached, "expected": expected}


def cells(*verdicts: str) -> list[dict]:
    """Cells on distinct paths (text), so that uuid probes never attach to them."""
    return [{"path": f"p{i}", "modality": "text", "verdict": v} for i, v in enumerate(verdicts)]


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
    assert exit_code({"cells": cells(result)}) == 1
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
    def code(*verdicts: str, uuid: tuple[str, ...] = ()) -> int:
        probes = [{"path": f"u{i}", "modality": "image", "verdict": v}
                  for i, v in enumerate(uuid)]
        probe_cells = [{"path": p["path"], "modality": "image", "verdict": "ISOLATED"}
                       for p in probes]
        return exit_code({"cells": cells(*verdicts) + probe_cells, "uuid_probe": probes})

    assert code("ISOLATED") == 0
    assert code("ISOLATED", "UNDER-HIT") == 1
    assert code("ERROR", "LEAK") == 1
    assert code("ERROR") == 2
    assert code() == 2
    assert code("ISOLATED", uuid=("ISOLATED",)) == 2  # its media content was not judged
    assert code("ISOLATED", uuid=("LEAK",)) == 1
    assert code("ISOLATED", uuid=("ERROR",)) == 2
    assert code("ERROR", uuid=("LEAK",)) == 1
    assert exit_code({"cells": cells("ISOLATED")}) == 0  # no uuid probe run
    assert code("n/a") == 2  # nothing the server can serve: nothing judged
    assert code("n/a", uuid=("LEAK",)) == 1


def test_one_precedence_within_a_cell_and_across_cells() -> None:
    """An under-hit and an error give the same verdict and exit code whether they are in
    one cell or in two (they used to give ERROR, exit 2, and exit 1)."""
    under, failed = step("same", "full", 32, 96), {"name": "cross", "error": "timeout"}
    one_cell = verdict([under, failed])[0]
    two_cells = [verdict([under])[0], verdict([failed])[0]]
    assert one_cell == "ERROR" and two_cells == ["UNDER-HIT", "ERROR"]
    assert exit_code({"cells": cells(one_cell)}) == 2
    assert exit_code({"cells": cells(*two_cells)}) == 2
    # Routed cells rank alike.
    routed = [{"step": "same-salt", "replica": "r0", "round": 0, "leak": False, "under": True,
               "cached": 0, "expected": 96}, {"step": "cross-salt", "error": "timeout"}]
    assert routed_verdict(routed)[0] == "ERROR"
