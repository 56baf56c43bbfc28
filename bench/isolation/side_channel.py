"""Timing side channels: can a tenant tell, from its own TTFT, what another tenant sent?

With salts on, the prefix (KV) cache is isolated, but vLLM's multimodal processor and
encoder caches are keyed by media content only. So a salted request for media that
another tenant sent is faster than one for media never seen. We measure it as an AUC,
P(TTFT of a never-seen request > TTFT of a seen-elsewhere request), with a bootstrap
confidence interval; the reference is the same AUC for an unsalted prefix miss versus
hit, which is the signal cache_salt exists to hide.
"""

from __future__ import annotations

import secrets

import aiohttp
import numpy as np

from bench.isolation.probe import prompt
from bench.paths.base import RequestPath
from bench.run.exchange import exchange

CROSS_TENANT, REFERENCE = "cross-tenant-media", "unsalted-hit-vs-miss"


def auc(slow: list[float], fast: list[float]) -> float:
    """P(a draw from ``slow`` > a draw from ``fast``), ties counting one half."""
    a, b = np.asarray(slow, float)[:, None], np.asarray(fast, float)[None, :]
    return float(np.mean((a > b) + 0.5 * (a == b)))


def auc_interval(slow: list[float], fast: list[float], *, level: float = 0.95,
                 resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`auc` (both samples resampled)."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(slow, float), np.asarray(fast, float)
    stats = [auc(rng.choice(a, a.size), rng.choice(b, b.size)) for _ in range(resamples)]
    tail = (1 - level) / 2 * 100
    return float(np.percentile(stats, tail)), float(np.percentile(stats, 100 - tail))


def summarize(path: str, modality: str, kind: str, slow: list[float],
              fast: list[float]) -> dict:
    """One side-channel row: AUC, interval and whether the two are distinguishable."""
    if len(slow) < 2 or len(fast) < 2:
        return {"path": path, "modality": modality, "kind": kind, "auc": None, "ci_low": None,
                "ci_high": None, "n_a": len(slow), "n_b": len(fast), "distinguishable": None}
    low, high = auc_interval(slow, fast)
    return {"path": path, "modality": modality, "kind": kind, "auc": auc(slow, fast),
            "ci_low": low, "ci_high": high, "n_a": len(slow), "n_b": len(fast),
            "median_a_ms": float(np.median(slow)), "median_b_ms": float(np.median(fast)),
            "distinguishable": bool(low > 0.5 or high < 0.5)}


async def measure(session: aiohttp.ClientSession, path: RequestPath, modality: str,
                  media: list[str], samples: int, timeout_s: float) -> list[dict]:
    """Interleaved samples of both comparisons for one path x modality.

    ``media`` holds ``3 * samples`` fresh media ids: per sample one that tenant A sends
    before tenant B does, one that B sends never seen, and one for the reference pair.
    """
    salt_a, salt_b = secrets.token_hex(16), secrets.token_hex(16)
    ttft: dict[str, list[float]] = {"seen": [], "unseen": [], "miss": [], "hit": []}

    async def timed(messages: list[dict], salt: str | None, key: str | None) -> None:
        out = await exchange(session, path, messages, 2, salt, timeout_s)
        if key is not None and out["ok"]:
            ttft[key].append(out["ttft_ms"])

    for i in range(samples):
        seen, unseen, ref = media[3 * i: 3 * i + 3]
        shared = prompt(modality, seen)  # the same prompt for both tenants
        await timed(shared, salt_a, None)        # tenant A sends it first
        await timed(shared, salt_b, "seen")      # B: KV isolated by salt, media cached
        await timed(prompt(modality, unseen), salt_b, "unseen")  # B: nothing cached
        reference = prompt(modality, ref)
        await timed(reference, None, "miss")
        await timed(reference, None, "hit")
    return [summarize(path.name, modality, CROSS_TENANT, ttft["unseen"], ttft["seen"]),
            summarize(path.name, modality, REFERENCE, ttft["miss"], ttft["hit"])]
