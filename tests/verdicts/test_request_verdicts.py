"""Request expectations and the problems that fail a run (no server)."""

from __future__ import annotations

from bench.verdicts.requests import PrefixTracker, expected_cached, full_hit_tokens
from bench.verdicts.runs import problems


def test_full_hit_is_whole_blocks_of_n_minus_one() -> None:
    assert full_hit_tokens(99, 32) == 96
    assert full_hit_tokens(97, 32) == 96
    assert full_hit_tokens(96, 32) == 64
    assert full_hit_tokens(1, 32) == 0


def test_tracker_judges_by_salt_case_and_completion() -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "[c1] a"}]}]
    longer = [*msgs, {"role": "user", "content": [{"type": "text", "text": "b"}]}]
    t = PrefixTracker()
    expect, key = t.start("A", msgs)
    assert expect == "none"
    assert t.start("A", msgs)[0] == "unjudged"   # twin still in flight
    t.complete(key)
    assert t.start("A", msgs)[0] == "full"
    assert t.start("B", msgs)[0] == "none"       # another salt shares nothing
    assert t.start(None, msgs)[0] == "none"
    assert t.start("A", longer)[0] == "unjudged"  # a shared prefix: not judged
    assert expected_cached("full", 99, 32) == 96
    assert expected_cached("none", 99, 32) == 0
    assert expected_cached("unjudged", 99, 32) is None


def test_run_problems_fail_a_ci_step() -> None:
    clean = {"passes": [{"failed": 0}], "expectations": {"unmet": []}, "interrupted": False}
    assert problems(clean) == []
    bad = {"passes": [{"failed": 2}, {"failed": 1}], "expectations": {"unmet": [{}]},
           "interrupted": True}
    assert problems(bad) == ["3 measured request(s) failed",
                             "1 request(s) missed their cache expectation",
                             "the run was interrupted"]
