"""Aggregate per-request records into ``vllm bench serve`` metrics plus prefix-cache hits.

Definitions and key names follow ``calculate_metrics`` and ``process_one_metric`` in
``vllm/benchmarks/serve.py``: only successful requests enter token totals and latency
statistics; TPOT of a request is ``(e2el - ttft) / (output_tokens - 1)`` when it has more
than one output token; ITL pools every gap of every request; ``std`` is numpy's
population deviation; percentiles are ``numpy.percentile`` (linear). Where vLLM reports
0 for an empty list this module reports ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

PERCENTILES = (50, 90, 99)


def aggregate(records: Sequence[dict], duration_s: float) -> dict:
    """Metrics of ``records`` (see the module docstring) over a run of ``duration_s``."""
    done = [r for r in records if r["ok"]]
    output_tokens = [int(r.get("output_tokens") or 0) for r in done]
    input_tokens = sum(int(r.get("prompt_tokens") or 0) for r in done)
    latencies = {
        "ttft": [r["ttft_ms"] for r in done],
        "tpot": [
            (r["e2el_ms"] - r["ttft_ms"]) / (n - 1)
            for r, n in zip(done, output_tokens)
            if n > 1
        ],
        "ttft_incl_preprocess": [r["ttft_incl_preprocess_ms"] for r in done
                                 if r.get("ttft_incl_preprocess_ms") is not None],
        "itl": [gap for r in done for gap in r["itl_ms"]],
        "itl_token": [gap for r in done for gap in r.get("itl_token_ms") or []],
        "e2el": [r["e2el_ms"] for r in done],
    }
    result: dict = {
        "completed": len(done),
        "failed": len(records) - len(done),
        "total_input_tokens": input_tokens,
        "total_output_tokens": sum(output_tokens),
        "request_throughput": _per_second(len(done), duration_s),
        "output_throughput": _per_second(sum(output_tokens), duration_s),
        "total_token_throughput": _per_second(input_tokens + sum(output_tokens), duration_s),
    }
    for name, values in latencies.items():
        result.update(_summary(name, values))
    result.update(_cache_hits(done))
    return result


def _per_second(count: int, duration_s: float) -> float | None:
    return count / duration_s if duration_s > 0 else None


def _summary(name: str, values_ms: list[float]) -> dict[str, float | None]:
    keys = [f"mean_{name}_ms", f"median_{name}_ms", f"std_{name}_ms"]
    keys += [f"p{p}_{name}_ms" for p in PERCENTILES]
    if not values_ms:
        return dict.fromkeys(keys)
    values = np.asarray(values_ms, dtype=float)
    stats = [np.mean(values), np.median(values), np.std(values)]
    stats += list(np.percentile(values, PERCENTILES))
    return {key: float(value) for key, value in zip(keys, stats)}


def _total(records: Iterable[dict], key: str) -> int | None:
    """Sum of ``key`` over ``records``; ``None`` if any record lacks it."""
    values = [r.get(key) for r in records]
    return None if None in values else int(sum(values))


def _ratio(numerator: int | None, denominator: int | None) -> float | None:
    return numerator / denominator if numerator is not None and denominator else None


def _cache_hits(done: list[dict]) -> dict:
    prompt, cached = _total(done, "prompt_tokens"), _total(done, "cached_tokens")
    expecting = [r for r in done if r.get("expected_cached_tokens") is not None]
    expected = _total(expecting, "expected_cached_tokens") if expecting else None
    return {
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "hit_rate": _ratio(cached, prompt),
        "expected_cached_tokens": expected,
        "hit_fraction_of_expected": _ratio(_total(expecting, "cached_tokens"), expected),
        # Apart, never netted: a leak must not hide an under-hit, nor the reverse.
        "leaked_tokens": sum(r.get("leaked_tokens") or 0 for r in done),
        "missing_tokens": sum(r.get("missing_tokens") or 0 for r in done),
    }


def group_by(records: Iterable[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    """Records by the tuple of their ``keys`` values (missing: ``None``), in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        groups.setdefault(tuple(record.get(k) for k in keys), []).append(record)
    return groups


def aggregate_groups(
    records: Iterable[dict], keys: tuple[str, ...], duration_s: float
) -> list[dict]:
    """One row per group: the ``keys`` fields, then ``aggregate`` of the group.

    Throughputs use the whole run's ``duration_s``, so a group's throughput is its share.
    """
    return [
        {**dict(zip(keys, values)), **aggregate(group, duration_s)}
        for values, group in group_by(records, keys).items()
    ]
