"""What the prefix cache should return for a request, from what was sent before it.

Keys are the prompt as actually sent (salt included), so the rule holds for every path
and salt mode: an identical earlier prompt under the same salt that has COMPLETED means
a full hit, ``floor((n-1)/B)*B`` tokens; no earlier prompt of the same case (first text)
under the same salt means 0; anything else (a shared prefix, a twin still in flight) is
not judged.
"""

from __future__ import annotations

import json

from bench.paths import media_paths
from bench.run.records import Record
from bench.vocab import FULL, MEASURE, NONE, UNJUDGED


def full_hit_tokens(prompt_tokens: int, block_size: int) -> int:
    """Cached tokens of an identical repeat: whole blocks of the first n-1 tokens."""
    return max(prompt_tokens - 1, 0) // block_size * block_size


def _case(messages: list[dict]) -> str:
    first = messages[0]["content"]
    return next((p["text"] for p in first if p["type"] == "text"), "")


class PrefixTracker:
    """Tracks the prompts of one pass as they start and complete."""

    def __init__(self) -> None:
        self.started_cases: set[tuple] = set()
        self.completed: set[tuple] = set()

    @staticmethod
    def keys(salt: str | None, messages: list[dict]) -> tuple[tuple, tuple]:
        return (salt, json.dumps(messages, sort_keys=True)), (salt, _case(messages))

    def start(self, salt: str | None, messages: list[dict]) -> tuple[str, tuple]:
        """Register a request about to be sent; return its expectation and its key."""
        full, case = self.keys(salt, messages)
        if full in self.completed:
            expect = FULL
        elif case not in self.started_cases:
            expect = NONE
        else:
            expect = UNJUDGED
        self.started_cases.add(case)
        return expect, full

    def complete(self, key: tuple) -> None:
        self.completed.add(key)


def expected_cached(expect: str, prompt_tokens: int | None, block_size: int) -> int | None:
    if prompt_tokens is None:
        return None
    if expect == FULL:
        return full_hit_tokens(prompt_tokens, block_size)
    return 0 if expect == NONE else None


def check_expectations(records: list[Record]) -> dict:
    """Each judged record: did it get the cached tokens its expectation says?"""
    judged = [r for r in records if r.get("expected_cached_tokens") is not None]
    unmet = [{k: r.get(k) for k in ("seq", "phase", "path", "salt_mode", "request_id",
                                    "modality", "expect", "prompt_tokens", "cached_tokens",
                                    "expected_cached_tokens")}
             for r in judged if r.get("cached_tokens") != r["expected_cached_tokens"]]
    return {"checked": len(judged), "met": len(judged) - len(unmet), "unmet": unmet}


def oracle_agreement(records: list[Record], primed: bool) -> dict:
    """Does the workload's oracle (computed when the workload was generated) agree with
    the expectation judged at run time from what was actually sent?

    Compared where both are judgements (full or none): salted passes of the paths that
    carry media (the oracle keys media by content, the token path drops media), on the
    first traversal of the workload (``prime`` if primed, else ``measure``), served in order.
    """
    first = "prime" if primed else MEASURE
    compared = [r for r in records
                if r["phase"] == first and r["salt_mode"] == "salted"
                and r["path"] in media_paths() and r.get("oracle") in (FULL, NONE)
                and r["expect"] in (FULL, NONE)]
    disagree = [{k: r.get(k) for k in ("path", "request_id", "oracle", "expect")}
                for r in compared if r["oracle"] != r["expect"]]
    return {"compared": len(compared), "agreed": len(compared) - len(disagree),
            "disagreements": disagree[:50]}
