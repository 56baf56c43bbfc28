"""The isolation experiment of one path x modality cell, and its verdict.

Each step sends a fresh prompt twice under a pair of salts; the second request's
cached tokens are judged by the salt rules (bench.expectations): the same salt, or no
salt twice, must give the full hit; another salt must give 0. Every first request is
a first sighting and must give 0 too.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import aiohttp

from bench import counters, salts
from bench.exchange import exchange
from bench.expectations import full_hit_tokens
from bench.isolation.probe import prompt

ISOLATED, LEAK, UNDER_HIT, ERROR = "ISOLATED", "LEAK", "UNDER-HIT", "ERROR"


@dataclass(frozen=True)
class Step:
    name: str
    salts: tuple[str | None, str | None]  # salt labels; None = no cache_salt
    second: str  # "full" or "zero"


STEPS = (
    Step("same-salt-repeat", ("A", "A"), "full"),
    Step("cross-salt", ("A", "B"), "zero"),
    Step("unsalted-repeat", (None, None), "full"),
    Step("salted-after-unsalted", (None, "C"), "zero"),
)


def verdict(steps: list[dict]) -> tuple[str, int, str | None]:
    """(verdict, leaked tokens, reason) from judged step results."""
    failed = [s for s in steps if s.get("error")]
    if failed:
        return ERROR, 0, f"{failed[0]['name']}: {failed[0]['error']}"
    leaks = [s for s in steps if s["rule"] == "zero" and s["cached"] > 0]
    if leaks:
        return LEAK, sum(s["cached"] for s in leaks), ", ".join(
            f"{s['name']}: {s['cached']} cached tokens" for s in leaks)
    under = [s for s in steps if s["rule"] == "full" and s["cached"] < s["expected"]]
    if under:
        return UNDER_HIT, 0, ", ".join(
            f"{s['name']}: {s['cached']}/{s['expected']} tokens" for s in under)
    return ISOLATED, 0, None


async def run_cell(session: aiohttp.ClientSession, base_url: str, path, modality: str,
                   media_id: str | None, block_size: int, timeout_s: float) -> dict:
    """Run every step of one cell; judge it and cross-check the server counters."""
    cell_salts = {label: secrets.token_hex(16) for label in ("A", "B", "C")}
    judged: list[dict] = []
    before = await counters.settled_scrape(session, base_url)
    sent_prompt = sent_cached = 0
    for step in STEPS:
        messages = prompt(modality, media_id)
        for i, label in enumerate(step.salts):
            salt = cell_salts[label] if label else None
            out = await exchange(session, path, messages, 4, salt, timeout_s)
            name = step.name if i else f"{step.name}/first"
            if not out["ok"]:
                judged.append({"name": name, "error": out["error"]})
                break
            n, cached = out["prompt_tokens"], out["cached_tokens"]
            sent_prompt, sent_cached = sent_prompt + n, sent_cached + cached
            rule = step.second if i else "zero"
            judged.append({
                "name": name, "salt": salts.digest(salt), "rule": rule,
                "prompt_tokens": n, "cached": cached, "ttft_ms": out["ttft_ms"],
                "expected": full_hit_tokens(n, block_size) if rule == "full" else 0})
    delta = counters.delta(before, await counters.settled_scrape(session, base_url))
    hits = delta.get("vllm:prefix_cache_hits_total")
    queries = delta.get("vllm:prefix_cache_queries_total")
    for s in judged:
        s["ok"] = not s.get("error") and (
            s["cached"] == 0 if s["rule"] == "zero" else s["cached"] >= s["expected"])
    result, leaked, reason = verdict(judged)
    return {"path": path.name, "modality": modality, "verdict": result,
            "leaked_tokens": leaked, "reason": reason, "steps": judged,
            "counters": {"prefix_cache_hits": hits, "prefix_cache_queries": queries,
                         "cached_tokens": sent_cached, "prompt_tokens": sent_prompt,
                         "agree": hits == sent_cached and queries == sent_prompt}}
