"""The uuid probe: vLLM lets a client ``uuid`` replace a media item's content hash.

Two different items of one modality (X, then Y of another size) are sent with the same
uuid and the same text. If the uuid keys the caches, Y is served from X's cached state:
KV blocks under the same salt, and the processed media (multimodal cache) across salts.
Per path x modality, two verdicts (bench.verdicts.isolation): the KV cache's (any cached
token for Y under another salt is a LEAK) and the media content's (Y under another salt
given X's processed media is SUBSTITUTED). What the same salt reuses under one uuid is
vLLM's documented uuid behaviour, reported as a finding.
"""

from __future__ import annotations

import secrets

import aiohttp

from bench.isolation.probe import nonce, prompt, tenant_uuid
from bench.measured import counters
from bench.paths.base import RequestPath
from bench.run.exchange import exchange
from bench.verdicts.isolation import (
    CONTROL_STEP,
    CROSS_SALT,
    SAME_SALT,
    X_STEP,
    content_verdict,
    uuid_verdict,
)
from bench.verdicts.requests import full_hit_tokens


async def run_uuid_probe(session: aiohttp.ClientSession, base_url: str, path: RequestPath,
                         modality: str, item_x: str, item_y: str, block_size: int,
                         timeout_s: float, per_tenant: bool = False) -> dict:
    """Send X then Y under one uuid (salts A, B, A) and a Y without uuid (control);
    ``per_tenant``: every uuid namespaced by the request's tenant, the control's too
    (:func:`bench.isolation.probe.tenant_uuid`)."""
    uuid, tag = f"saltbench-{secrets.token_hex(6)}", nonce()
    salt_a, salt_b = secrets.token_hex(16), secrets.token_hex(16)
    steps = [(X_STEP, item_x, uuid, salt_a), (CROSS_SALT, item_y, uuid, salt_b),
             (SAME_SALT, item_y, uuid, salt_a), (CONTROL_STEP, item_y, None, salt_a)]
    out: dict[str, dict] = {}
    for name, media, item_uuid, salt in steps:
        if per_tenant:
            item_uuid = tenant_uuid(salt, item_uuid or media)
        before = await counters.settled_scrape(session, base_url)
        res = await exchange(session, path, prompt(modality, media, item_uuid, tag), 2, salt,
                             timeout_s)
        d = counters.delta(before, await counters.settled_scrape(session, base_url))
        out[name] = {"ok": res["ok"], "error": res["error"], "prompt_tokens": res.get("prompt_tokens"),
                     "cached_tokens": res.get("cached_tokens"),
                     "mm_cache_hits": d.get("vllm:mm_cache_hits_total"),
                     "mm_cache_queries": d.get("vllm:mm_cache_queries_total")}
    same, cross = out[SAME_SALT], out[CROSS_SALT]
    result, leaked, reason = uuid_verdict(out, CROSS_SALT)
    content, evidence, content_reason = content_verdict(out)
    return {"path": path.name, "modality": modality, "steps": out, "verdict": result,
            "leaked_tokens": leaked, "reason": reason, "content": content,
            "content_evidence": evidence, "content_reason": content_reason,
            "same_salt_cached_tokens": same["cached_tokens"],
            "cross_salt_cached_tokens": cross["cached_tokens"],
            "mm_cache_hits": cross["mm_cache_hits"],
            "finding": _finding(out, modality, evidence, block_size)}


def _finding(out: dict[str, dict], modality: str, evidence: list[str], block_size: int) -> str:
    """What the requests that ran show: the salt result first, then what the uuid did
    (failed steps are in the verdicts' reasons)."""
    same, cross = out[SAME_SALT], out[CROSS_SALT]
    parts = []
    if cross["ok"]:
        parts.append(f"another salt: {cross['cached_tokens']} cached tokens (salt leak)"
                     if cross["cached_tokens"] else
                     "another salt: 0 cached tokens (KV isolated by salt)")
        if evidence:
            parts[-1] += (f", but the other tenant's {modality} was used for a different "
                          f"one ({'; '.join(evidence)})")
    if same["ok"]:
        full = full_hit_tokens(same["prompt_tokens"], block_size)
        parts.append(f"same salt: a DIFFERENT {modality} with the same uuid got the full KV "
                     f"hit ({same['cached_tokens']} tokens): the uuid replaces the content hash"
                     if same["cached_tokens"] >= full > 0 else
                     f"same salt: a different {modality} with the same uuid got "
                     f"{same['cached_tokens']} cached tokens (full would be {full})")
    return "; ".join(parts) or "none: both Y-under-the-same-uuid requests failed"
