"""The isolation experiment of one path x modality cell.

Each step sends a fresh prompt twice under a pair of salts; the requests are judged by
:mod:`bench.verdicts.isolation`, and the cell's counters are checked against them. A
failed request ends its step only: the next step still runs, so nothing hides a leak.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import aiohttp

from bench import salts
from bench.isolation.probe import nonce, prompt
from bench.measured import counters
from bench.paths.base import RequestPath
from bench.run.exchange import exchange
from bench.verdicts.isolation import step_ok, verdict
from bench.verdicts.requests import full_hit_tokens
from bench.verdicts.runs import counters_agree, counters_exact
from bench.vocab import FULL, NONE


@dataclass(frozen=True)
class Step:
    name: str
    salts: tuple[str | None, str | None]  # salt labels; None = no cache_salt
    second: str  # what the second request must get: FULL or NONE
    #: Each request ends with its own text after the media (same first block and media).
    diverge: bool = False


STEPS = (
    Step("same-salt-repeat", ("A", "A"), FULL),
    Step("cross-salt", ("A", "B"), NONE),
    Step("unsalted-repeat", (None, None), FULL),
    Step("salted-after-unsalted", (None, "C"), NONE),
    Step("salted-then-unsalted", ("A", None), NONE),
    Step("cross-salt-same-media", ("A", "B"), NONE, diverge=True),
)


async def run_cell(session: aiohttp.ClientSession, base_url: str, path: RequestPath,
                   modality: str, media_id: str | None, block_size: int,
                   timeout_s: float) -> dict:
    """Run every step of one cell; judge it and cross-check the server counters."""
    cell_salts = {label: secrets.token_hex(16) for label in ("A", "B", "C")}
    judged: list[dict] = []
    before = await counters.settled_scrape(session, base_url)
    sent_prompt = sent_cached = 0
    for step in STEPS:
        tag = nonce()
        for i, label in enumerate(step.salts):
            salt = cell_salts[label] if label else None
            messages = prompt(modality, media_id, tag=tag,
                              trailing=f"Then answer variant {i}." if step.diverge else None)
            out = await exchange(session, path, messages, 4, salt, timeout_s)
            name = step.name if i else f"{step.name}/first"
            if not out["ok"]:
                judged.append({"name": name, "error": out["error"]})
                break  # this step only
            n, cached = out["prompt_tokens"], out["cached_tokens"]
            sent_prompt, sent_cached = sent_prompt + n, sent_cached + cached
            rule = step.second if i else NONE
            judged.append({
                "name": name, "salt": salts.digest(salt), "rule": rule,
                "prompt_tokens": n, "cached": cached, "ttft_ms": out["ttft_ms"],
                "expected": full_hit_tokens(n, block_size) if rule == FULL else 0})
    delta = counters.delta(before, await counters.settled_scrape(session, base_url))
    for s in judged:
        s["ok"] = step_ok(s)
    result, leaked, reason = verdict(judged)
    return {"path": path.name, "modality": modality, "verdict": result,
            "leaked_tokens": leaked, "reason": reason, "steps": judged,
            "counters": {"prefix_cache_hits": delta.get(counters.HITS),
                         "prefix_cache_queries": delta.get(counters.QUERIES),
                         "cached_tokens": sent_cached, "prompt_tokens": sent_prompt,
                         "agree": counters_agree(delta, sent_prompt, sent_cached),
                         "exact": counters_exact(delta, sent_prompt, sent_cached)}}
