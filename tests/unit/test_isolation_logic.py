"""Isolation verdicts, AUCs and exit codes (no engine)."""

from __future__ import annotations

import pytest

from bench.isolation.cells import verdict
from bench.isolation.experiment import IsolationOptions, cells_of, exit_code
from bench.isolation.side_channel import auc, auc_interval, summarize


def step(name: str, rule: str, cached: int, expected: int = 0) -> dict:
    return {"name": name, "rule": rule, "cached": cached, "expected": expected}


def test_verdicts() -> None:
    ok = [step("same", "full", 96, 96), step("cross", "zero", 0)]
    assert verdict(ok) == ("ISOLATED", 0, None)
    leak = verdict([step("same", "full", 96, 96), step("cross", "zero", 64)])
    assert leak[0] == "LEAK" and leak[1] == 64 and "cross: 64" in leak[2]
    under = verdict([step("same", "full", 32, 96), step("cross", "zero", 0)])
    assert under[0] == "UNDER-HIT" and "32/96" in under[2]
    error = verdict([step("same", "full", 96, 96), {"name": "cross", "error": "HTTP 500: x"}])
    assert error == ("ERROR", 0, "cross: HTTP 500: x")
    # A leak outranks an under-hit: it is what the suite exists to catch.
    assert verdict([step("same", "full", 0, 96), step("cross", "zero", 32)])[0] == "LEAK"


def test_exit_codes() -> None:
    assert exit_code([{"verdict": "ISOLATED"}]) == 0
    assert exit_code([{"verdict": "ISOLATED"}, {"verdict": "UNDER-HIT"}]) == 1
    assert exit_code([{"verdict": "ERROR"}, {"verdict": "LEAK"}]) == 1
    assert exit_code([{"verdict": "ERROR"}]) == 2
    assert exit_code([]) == 2


def test_auc_and_interval() -> None:
    assert auc([3, 4], [1, 2]) == 1.0
    assert auc([1, 2], [3, 4]) == 0.0
    assert auc([1, 2], [1, 2]) == 0.5
    low, high = auc_interval([3, 4, 5, 6], [1, 2, 3, 4])
    assert 0 <= low <= auc([3, 4, 5, 6], [1, 2, 3, 4]) <= high <= 1
    row = summarize("chat", "image", "x", [10, 11, 12, 13], [1, 2, 3, 4])
    assert row["auc"] == 1.0 and row["distinguishable"] is True
    same = summarize("chat", "image", "x", [1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1])
    assert same["auc"] == pytest.approx(0.5) and same["distinguishable"] is False
    assert summarize("chat", "image", "x", [1], [2])["auc"] is None


def test_token_only_path_gets_text_cells_only() -> None:
    cells = cells_of(IsolationOptions())
    assert ("generate-tokens", "text") in cells
    assert ("generate-tokens", "image") not in cells
    assert ("generate-parts", "video") in cells
