"""Timing side channels: can a tenant tell, from its own TTFT, what another tenant sent?

With salts on, the prefix (KV) cache is isolated, but vLLM's multimodal processor and
encoder caches are keyed by media content only. So a salted request for media that
another tenant sent can be faster than one for media never seen. Each row holds TTFT
pairs sent one after the other and compares them with :mod:`bench.stats` (paired AUC,
one-sided Wilcoxon signed-rank p). The cross-tenant rows are the tested family (Holm
across them); the reference rows, an unsalted prefix miss versus hit (the signal
cache_salt exists to hide), are positive controls, each tested alone and outside the
family: they show the timing can see a cache hit at all.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import asdict

import aiohttp
import numpy as np

from bench.isolation.probe import nonce, prompt, tenant_uuid
from bench.paths.base import RequestPath
from bench.run.exchange import exchange
from bench.stats import POWER_TARGET, guess_accuracy, side_channel_tests

CROSS_TENANT, REFERENCE = "cross-tenant-media", "unsalted-hit-vs-miss"
KINDS = (CROSS_TENANT, REFERENCE)
#: Tenant B's two probes of a sample: media tenant A sent, and media never seen.
SEEN, UNSEEN = "seen", "unseen"


def probe_orders(samples: int, rng: random.Random) -> list[tuple[str, str]]:
    """Per sample, the order of tenant B's seen and unseen probes: each order in half of
    the samples (one more at random when odd), shuffled."""
    orders = [(SEEN, UNSEEN), (UNSEEN, SEEN)]
    rng.shuffle(orders)
    out = [orders[i % 2] for i in range(samples)]
    rng.shuffle(out)
    return out


def summarize(path: str, modality: str, kind: str,
              pairs: list[tuple[float | None, float | None]]) -> dict:
    """One row as measured from its (slow, fast) TTFT pairs (ms; ``None``: that request
    failed): the complete pairs (``ttft_a_ms[i]`` with ``ttft_b_ms[i]``), how many were
    dropped, medians; :func:`add_tests` adds the statistics once every row is in."""
    complete = [(a, b) for a, b in pairs if a is not None and b is not None]
    slow, fast = [a for a, _ in complete], [b for _, b in complete]
    return {"path": path, "modality": modality, "kind": kind, "n_a": len(slow),
            "n_b": len(fast), "pairs_dropped": len(pairs) - len(complete),
            "median_a_ms": float(np.median(slow)) if slow else None,
            "median_b_ms": float(np.median(fast)) if fast else None,
            "ttft_a_ms": slow, "ttft_b_ms": fast}


def add_tests(rows: list[dict]) -> None:
    """Add paired AUC, interval, p-value, adjusted p, min detectable paired AUC, finding and
    ``in_family`` to every row (Holm across the run's cross-tenant rows, each reference row
    tested alone), and to the cross-tenant rows what an attacker's guess is worth
    (:func:`bench.stats.guess_accuracy`)."""
    tests = side_channel_tests([(r["ttft_a_ms"], r["ttft_b_ms"]) for r in rows],
                               POWER_TARGET["alpha"], [r["kind"] == CROSS_TENANT for r in rows])
    for row, test in zip(rows, tests):
        row.update(asdict(test))
        if row["kind"] == CROSS_TENANT:
            row["guess"] = guess_accuracy(row["ttft_a_ms"], row["ttft_b_ms"])


async def measure(session: aiohttp.ClientSession, path: RequestPath, modality: str,
                  media: list[str], samples: int, timeout_s: float,
                  rng: random.Random, per_tenant: bool = False) -> list[dict]:
    """Interleaved sample pairs of both comparisons for one path x modality.

    ``media`` holds ``3 * samples`` fresh media ids: per sample one that tenant A sends
    before tenant B does, one that B sends never seen, and one for the reference pair.
    B's seen and unseen probes (a pair) come one after the other in the order
    :func:`probe_orders` draws from ``rng``; the reference hit always follows its miss.
    ``per_tenant``: every item carries a uuid namespaced by its tenant
    (:func:`bench.isolation.probe.tenant_uuid`).
    """
    salt_a, salt_b = secrets.token_hex(16), secrets.token_hex(16)
    pairs: dict[str, list[tuple[float | None, float | None]]] = {CROSS_TENANT: [],
                                                                 REFERENCE: []}

    async def timed(item: str, salt: str | None, tag: str) -> float | None:
        uuid = tenant_uuid(salt, item) if per_tenant else None
        out = await exchange(session, path, prompt(modality, item, uuid, tag), 2, salt,
                             timeout_s)
        return out["ttft_ms"] if out["ok"] else None

    for i, order in enumerate(probe_orders(samples, rng)):
        seen, unseen, ref = media[3 * i: 3 * i + 3]
        tags = {SEEN: nonce(), UNSEEN: nonce()}
        await timed(seen, salt_a, tags[SEEN])  # tenant A sends it first, the same prompt
        # B: the seen one has its KV isolated by salt, its media cached.
        ttft = {key: await timed({SEEN: seen, UNSEEN: unseen}[key], salt_b, tags[key])
                for key in order}
        pairs[CROSS_TENANT].append((ttft[UNSEEN], ttft[SEEN]))
        tag = nonce()
        miss = await timed(ref, None, tag)
        pairs[REFERENCE].append((miss, await timed(ref, None, tag)))
    return [summarize(path.name, modality, kind, pairs[kind]) for kind in KINDS]
