"""What the prefix cache should return for a request, from what was sent before it.

Keys are the prompt as actually sent (salt included), so the rule holds for every path
and salt mode: an identical earlier prompt under the same salt that has COMPLETED means
a full hit, ``floor((n-1)/B)*B`` tokens; no earlier prompt of the same case (first text)
under the same salt means 0; anything else (a shared prefix, a twin still in flight) is
not judged.
"""

from __future__ import annotations

import json


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
            expect = "full"
        elif case not in self.started_cases:
            expect = "none"
        else:
            expect = "unjudged"
        self.started_cases.add(case)
        return expect, full

    def complete(self, key: tuple) -> None:
        self.completed.add(key)


def expected_cached(expect: str, prompt_tokens: int | None, block_size: int) -> int | None:
    if prompt_tokens is None:
        return None
    if expect == "full":
        return full_hit_tokens(prompt_tokens, block_size)
    return 0 if expect == "none" else None
