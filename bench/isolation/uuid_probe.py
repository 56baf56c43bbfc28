"""The uuid probe: vLLM lets a client ``uuid`` replace a media item's content hash.

Two different images are sent with the same uuid and the same text. If the uuid keys
the caches, the second image is served from the first one's cached state: KV blocks
under the same salt, and the processed media (multimodal cache) across salts. That is
vLLM's documented uuid behaviour, reported as a finding; the salt verdict is whether the
image under another salt got any cached token (LEAK).
"""

from __future__ import annotations

import secrets

import aiohttp

from bench.isolation.probe import nonce, prompt
from bench.measured import counters
from bench.paths.base import RequestPath
from bench.run.exchange import exchange
from bench.verdicts.isolation import uuid_verdict
from bench.verdicts.requests import full_hit_tokens

#: The steps that send image Y under X's uuid: under another salt, and under X's salt.
CROSS_SALT, SAME_SALT = "y-salt-b-same-uuid", "y-salt-a-same-uuid"


async def run_uuid_probe(session: aiohttp.ClientSession, base_url: str, path: RequestPath,
                         image_x: str, image_y: str, block_size: int,
                         timeout_s: float) -> dict:
    """Send X then Y under one uuid (salts A, B, A) and a Y without uuid (control)."""
    uuid, tag = f"saltbench-{secrets.token_hex(6)}", nonce()
    salt_a, salt_b = secrets.token_hex(16), secrets.token_hex(16)
    steps = [("x-salt-a", image_x, uuid, salt_a), (CROSS_SALT, image_y, uuid, salt_b),
             (SAME_SALT, image_y, uuid, salt_a), ("y-salt-a-no-uuid", image_y, None, salt_a)]
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
    same, cross = out[SAME_SALT], out[CROSS_SALT]
    result, leaked, reason = uuid_verdict(out, CROSS_SALT)
    return {"path": path.name, "steps": out, "verdict": result, "leaked_tokens": leaked,
            "reason": reason, "same_salt_cached_tokens": same["cached_tokens"],
            "cross_salt_cached_tokens": cross["cached_tokens"],
            "mm_cache_hits": cross["mm_cache_hits"], "finding": _finding(out, block_size)}


def _finding(out: dict[str, dict], block_size: int) -> str:
    """What the requests that ran show: the salt result first, then what the uuid did
    (failed steps are in the verdict's reason)."""
    same, cross = out[SAME_SALT], out[CROSS_SALT]
    parts = []
    if cross["ok"]:
        parts.append(f"another salt: {cross['cached_tokens']} cached tokens (salt leak)"
                     if cross["cached_tokens"] else
                     "another salt: 0 cached tokens (KV isolated by salt)")
        if cross["mm_cache_hits"]:
            parts[-1] += (f", but {cross['mm_cache_hits']:.0f} multimodal-cache hit(s): the "
                          "other tenant's processed image was reused for a different image")
    if same["ok"]:
        full = full_hit_tokens(same["prompt_tokens"], block_size)
        parts.append(f"same salt: a DIFFERENT image with the same uuid got the full KV hit "
                     f"({same['cached_tokens']} tokens): the uuid replaces the content hash"
                     if same["cached_tokens"] >= full > 0 else
                     f"same salt: a different image with the same uuid got "
                     f"{same['cached_tokens']} cached tokens (full would be {full})")
    return "; ".join(parts) or "none: both Y-under-the-same-uuid requests failed"
