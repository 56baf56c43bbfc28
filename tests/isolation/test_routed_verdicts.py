"""The routed isolation cell's judgement: each request judged on the replica it landed on."""

from __future__ import annotations

import pytest

from bench.isolation.replicas import judge_round, routed_verdict

B, N = 32, 100  # a full hit of a 100-token prompt is 96 tokens


def _round(landed: tuple[str | None, str | None, str | None],
           cached: tuple[int, int, int]) -> list[dict]:
    steps = [{"round": 0, "step": step, "replica": replica, "prompt_tokens": N, "cached": c}
             for step, replica, c in zip(("prime", "cross-salt", "same-salt"), landed, cached)]
    judge_round(steps, B)
    return steps


@pytest.mark.parametrize("landed, cached, verdict", [
    (("r0", "r0", "r0"), (0, 0, 96), "ISOLATED"),   # B misdirected, but got nothing
    (("r0", "r1", "r1"), (0, 0, 0), "ISOLATED"),    # A again elsewhere: nothing to hit
    (("r0", "r0", "r0"), (0, 96, 96), "LEAK"),      # B hit A's prefix
    (("r0", "r1", "r1"), (0, 0, 96), "LEAK"),       # a hit where the prefix never was
    (("r0", "r1", "r0"), (0, 0, 64), "UNDER-HIT"),
    (("r0", None, "r0"), (0, 0, 96), "ERROR"),      # a request no replica claims
])
def test_routed_rounds(landed: tuple, cached: tuple, verdict: str) -> None:
    steps = _round(landed, cached)
    assert routed_verdict(steps)[0] == verdict


def test_leaks_name_the_replica_and_count_only_tokens_beyond_the_allowed() -> None:
    steps = _round(("r1", "r1", "r1"), (0, 64, 96))
    verdict, leaked, reason = routed_verdict(steps)
    assert (verdict, leaked) == ("LEAK", 64)
    assert reason == "cross-salt on r1: 64 cached tokens (allowed 0)"
    assert [s["with_prime"] for s in steps] == [False, True, True]


def test_a_failed_request_is_an_error_unless_something_leaked() -> None:
    failed = [{"round": 1, "step": "prime", "error": "HTTP 500: boom"}]
    assert routed_verdict(failed)[0] == "ERROR"
    assert routed_verdict(_round(("r0", "r0", "r0"), (0, 32, 96)) + failed)[0] == "LEAK"
