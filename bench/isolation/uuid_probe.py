"""The uuid probe: vLLM lets a client ``uuid`` replace a media item's content hash.

Two different images are sent with the same uuid and the same text. If the uuid keys
the caches, the second image is served from the first one's cached state: KV blocks
under the same salt, and the processed media (multimodal cache) across salts. This is
reported as a finding of its own, not as a salt verdict.
"""

from __future__ import annotations

import secrets

import aiohttp

from bench.isolation.probe import nonce, prompt
from bench.paths.base import RequestPath
from bench.run import counters
from bench.run.exchange import exchange
from bench.verdicts.requests import full_hit_tokens


async def run_uuid_probe(session: aiohttp.ClientSession, base_url: str, path: RequestPath,
                         image_x: str, image_y: str, block_size: int,
                         timeout_s: float) -> dict:
    """Send X then Y under one uuid (salts A, B, A) and a Y without uuid (control)."""
    uuid, tag = f"saltbench-{secrets.token_hex(6)}", nonce()
    salt_a, salt_b = secrets.token_hex(16), secrets.token_hex(16)
    steps = [("x-salt-a", image_x, uuid, salt_a), ("y-salt-b-same-uuid", image_y, uuid, salt_b),
             ("y-salt-a-same-uuid", image_y, uuid, salt_a), ("y-salt-a-no-uuid", image_y, None, salt_a)]
    out: dict[str, dict] = {}
    for name, media, item_uuid, salt in steps:
        before = await counters.settled_scrape(session, base_url)
        res = await exchange(session, path, prompt("image", media, item_uuid, tag), 2, salt,
                             timeout_s)
        d = counters.delta(before, await counters.settled_scrape(session, base_url))
        out[name] = {"ok": res["ok"], "error": res["error"], "prompt_tokens": res.get("prompt_tokens"),
                     "cached_tokens": res.get("cached_tokens"),
                     "mm_cache_hits": d.get("vllm:mm_cache_hits_total"),
                     "mm_cache_queries": d.get("vllm:mm_cache_queries_total")}
    same, cross = out["y-salt-a-same-uuid"], out["y-salt-b-same-uuid"]
    failed = next(((name, s["error"]) for name, s in out.items() if not s["ok"]), None)
    if failed:
        finding = f"probe failed at {failed[0]}: {failed[1]}"
    else:
        finding = _finding(same["cached_tokens"], full_hit_tokens(same["prompt_tokens"],
                                                                  block_size), cross)
    return {"path": path.name, "steps": out,
            "same_salt_cached_tokens": same["cached_tokens"],
            "cross_salt_cached_tokens": cross["cached_tokens"],
            "mm_cache_hits": cross["mm_cache_hits"], "finding": finding}


def _finding(same_cached: int, full: int, cross: dict) -> str:
    parts = []
    if same_cached >= full > 0:
        parts.append(f"same salt: a DIFFERENT image with the same uuid got the full KV hit "
                     f"({same_cached} tokens): the uuid replaces the content hash")
    else:
        parts.append(f"same salt: a different image with the same uuid got {same_cached} "
                     f"cached tokens (full would be {full})")
    if cross["cached_tokens"]:
        parts.append(f"another salt: {cross['cached_tokens']} cached tokens (salt leak)")
    else:
        parts.append("another salt: 0 cached tokens (KV isolated by salt)")
    if cross["mm_cache_hits"]:
        parts.append(f"but {cross['mm_cache_hits']:.0f} multimodal-cache hit(s) across salts: "
                     "the other tenant's processed image was reused for a different image")
    return "; ".join(parts)
