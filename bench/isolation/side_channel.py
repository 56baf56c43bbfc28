"""Timing side channels: can a tenant tell, from its own TTFT, what another tenant sent?

With salts on, the prefix (KV) cache is isolated, but vLLM's multimodal processor and
encoder caches are keyed by media content only. So a salted request for media that
another tenant sent can be faster than one for media never seen. Each row compares two
TTFT samples with :mod:`bench.stats` (AUC, one-sided Mann-Whitney p, Holm across all the
rows of a run); the reference row is an unsalted prefix miss versus hit, the signal
cache_salt exists to hide.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import asdict

import aiohttp
import numpy as np

from bench.isolation.probe import prompt
from bench.paths.base import RequestPath
from bench.run.exchange import exchange
from bench.stats import side_channel_tests

CROSS_TENANT, REFERENCE = "cross-tenant-media", "unsalted-hit-vs-miss"
KINDS = (CROSS_TENANT, REFERENCE)
#: Tenant B's two probes of a sample: media tenant A sent, and media never seen.
SEEN, UNSEEN = "seen", "unseen"
#: The side-channel power target when the sample count is not given: detect a true AUC of
#: 0.8 with 80% power at alpha 0.05, Holm-adjusted across the run's rows.
POWER_TARGET = {"target_auc": 0.8, "power": 0.8, "alpha": 0.05}


def probe_orders(samples: int, rng: random.Random) -> list[tuple[str, str]]:
    """Per sample, the order of tenant B's seen and unseen probes: each order in half of
    the samples (one more at random when odd), shuffled."""
    orders = [(SEEN, UNSEEN), (UNSEEN, SEEN)]
    rng.shuffle(orders)
    out = [orders[i % 2] for i in range(samples)]
    rng.shuffle(out)
    return out


def summarize(path: str, modality: str, kind: str, slow: list[float],
              fast: list[float]) -> dict:
    """One row as measured: sizes, medians and both TTFT samples (ms); :func:`add_tests`
    adds the statistics once every row of the run is in."""
    return {"path": path, "modality": modality, "kind": kind, "n_a": len(slow),
            "n_b": len(fast), "median_a_ms": float(np.median(slow)) if slow else None,
            "median_b_ms": float(np.median(fast)) if fast else None,
            "ttft_a_ms": slow, "ttft_b_ms": fast}


def add_tests(rows: list[dict]) -> None:
    """Add AUC, interval, p-value, Holm-adjusted p, min detectable AUC and finding to
    every row, the adjustment taken across all ``rows`` (one run)."""
    tests = side_channel_tests([(r["ttft_a_ms"], r["ttft_b_ms"]) for r in rows],
                               POWER_TARGET["alpha"])
    for row, test in zip(rows, tests):
        row.update(asdict(test))


async def measure(session: aiohttp.ClientSession, path: RequestPath, modality: str,
                  media: list[str], samples: int, timeout_s: float,
                  rng: random.Random) -> list[dict]:
    """Interleaved samples of both comparisons for one path x modality.

    ``media`` holds ``3 * samples`` fresh media ids: per sample one that tenant A sends
    before tenant B does, one that B sends never seen, and one for the reference pair.
    B's seen and unseen probes come in the order :func:`probe_orders` draws from ``rng``;
    the reference hit always follows its miss.
    """
    salt_a, salt_b = secrets.token_hex(16), secrets.token_hex(16)
    ttft: dict[str, list[float]] = {SEEN: [], UNSEEN: [], "miss": [], "hit": []}

    async def timed(messages: list[dict], salt: str | None, key: str | None) -> None:
        out = await exchange(session, path, messages, 2, salt, timeout_s)
        if key is not None and out["ok"]:
            ttft[key].append(out["ttft_ms"])

    for i, order in enumerate(probe_orders(samples, rng)):
        seen, unseen, ref = media[3 * i: 3 * i + 3]
        probes = {SEEN: prompt(modality, seen), UNSEEN: prompt(modality, unseen)}
        await timed(probes[SEEN], salt_a, None)  # tenant A sends it first, the same prompt
        for key in order:  # B: the seen one has its KV isolated by salt, media cached
            await timed(probes[key], salt_b, key)
        reference = prompt(modality, ref)
        await timed(reference, None, "miss")
        await timed(reference, None, "hit")
    return [summarize(path.name, modality, CROSS_TENANT, ttft[UNSEEN], ttft[SEEN]),
            summarize(path.name, modality, REFERENCE, ttft["miss"], ttft["hit"])]
