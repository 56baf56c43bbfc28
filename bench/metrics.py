"""Aggregate per-request records into ``vllm bench serve`` metrics plus prefix-cache hits.

Definitions and key names follow ``calculate_metrics`` and ``process_one_metric`` in
``vllm/benchmarks/serve.py``: only successful requests enter token totals and latency
statistics; TPOT of a request is ``(e2el - ttft) / (output_tokens - 1)`` when it has more
than one output token; ITL pools every gap of every request; ``std`` is numpy's
population deviation; percentiles are ``numpy.percentile`` (linear). Where vLLM reports
0 for an empty list this module reports ``None``. With service-level objectives
(:mod:`bench.goodput`) it also counts good requests: ``request_goodput`` and
``slo_attainment``.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from bench.goodput import is_good

PERCENTILES = (50, 90, 99)


LATENCIES = ("ttft", "tpot", "ttft_incl_preprocess", "itl", "itl_token", "e2el")


class Metrics:
    """:func:`aggregate` fed one record at a time: counts, sums and the latencies that
    percentiles need (as arrays of floats), never the records themselves; good requests by
    ``slos`` (:mod:`bench.goodput`)."""

    def __init__(self, slos: Mapping[str, float] | None = None) -> None:
        self.slos = dict(slos or {})
        self.completed = self.failed = self.input_tokens = self.output_tokens = 0
        self.good = 0
        self.latencies = {name: array("d") for name in LATENCIES}
        #: Sums for the cache hits; None once a record lacks the value.
        self.prompt: int | None = 0
        self.cached: int | None = 0
        self.expecting = 0
        self.expected = 0
        self.expecting_cached: int | None = 0
        self.leaked = self.missing = 0

    def add(self, r: dict) -> None:
        if not r["ok"]:
            self.failed += 1
            return
        self.completed += 1
        self.good += is_good(r, self.slos) if self.slos else 0
        n = int(r.get("output_tokens") or 0)
        self.output_tokens += n
        self.input_tokens += int(r.get("prompt_tokens") or 0)
        lat = self.latencies
        lat["ttft"].append(r["ttft_ms"])
        if n > 1:
            lat["tpot"].append((r["e2el_ms"] - r["ttft_ms"]) / (n - 1))
        if r.get("ttft_incl_preprocess_ms") is not None:
            lat["ttft_incl_preprocess"].append(r["ttft_incl_preprocess_ms"])
        lat["itl"].extend(r["itl_ms"])
        lat["itl_token"].extend(r.get("itl_token_ms") or [])
        lat["e2el"].append(r["e2el_ms"])
        self.prompt = _plus(self.prompt, r.get("prompt_tokens"))
        self.cached = _plus(self.cached, r.get("cached_tokens"))
        if r.get("expected_cached_tokens") is not None:
            self.expecting += 1
            self.expected += int(r["expected_cached_tokens"])
            self.expecting_cached = _plus(self.expecting_cached, r.get("cached_tokens"))
        self.leaked += r.get("leaked_tokens") or 0
        self.missing += r.get("missing_tokens") or 0

    def result(self, duration_s: float) -> dict:
        """The metrics over a run of ``duration_s``."""
        out_tokens, in_tokens = self.output_tokens, self.input_tokens
        result: dict = {
            "completed": self.completed,
            "failed": self.failed,
            "total_input_tokens": in_tokens,
            "total_output_tokens": out_tokens,
            "request_throughput": _per_second(self.completed, duration_s),
            "output_throughput": _per_second(out_tokens, duration_s),
            "total_token_throughput": _per_second(in_tokens + out_tokens, duration_s),
            **self._goodput(duration_s),
        }
        for name, values in self.latencies.items():
            result.update(_summary(name, values))
        expected = self.expected if self.expecting else None
        result.update({
            "prompt_tokens": self.prompt,
            "cached_tokens": self.cached,
            "hit_rate": _ratio(self.cached, self.prompt),
            "expected_cached_tokens": expected,
            "hit_fraction_of_expected": _ratio(self.expecting_cached, expected),
            # Apart, never netted: a leak must not hide an under-hit, nor the reverse.
            "leaked_tokens": self.leaked,
            "missing_tokens": self.missing,
        })
        return result


    def _goodput(self, duration_s: float) -> dict:
        """Good requests, per second and as a share of those sent (None without objectives)."""
        if not self.slos:
            return dict.fromkeys(("good_requests", "request_goodput", "slo_attainment"))
        return {"good_requests": self.good,
                "request_goodput": _per_second(self.good, duration_s),
                "slo_attainment": _ratio(self.good, self.completed + self.failed)}


def _plus(total: int | None, value: int | None) -> int | None:
    return None if total is None or value is None else total + int(value)


def aggregate(records: Iterable[dict], duration_s: float,
              slos: Mapping[str, float] | None = None) -> dict:
    """Metrics of ``records`` (see the module docstring) over a run of ``duration_s``."""
    metrics = Metrics(slos)
    for r in records:
        metrics.add(r)
    return metrics.result(duration_s)


def _per_second(count: int, duration_s: float) -> float | None:
    return count / duration_s if duration_s > 0 else None


def _summary(name: str, values_ms: Sequence[float]) -> dict[str, float | None]:
    keys = [f"mean_{name}_ms", f"median_{name}_ms", f"std_{name}_ms"]
    keys += [f"p{p}_{name}_ms" for p in PERCENTILES]
    if not len(values_ms):
        return dict.fromkeys(keys)
    values = np.asarray(values_ms, dtype=float)
    stats = [np.mean(values), np.median(values), np.std(values)]
    stats += list(np.percentile(values, PERCENTILES))
    return {key: float(value) for key, value in zip(keys, stats)}


def _ratio(numerator: int | None, denominator: int | None) -> float | None:
    return numerator / denominator if numerator is not None and denominator else None


def group_by(records: Iterable[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    """Records by the tuple of their ``keys`` values (missing: ``None``), in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        groups.setdefault(tuple(record.get(k) for k in keys), []).append(record)
    return groups


class GroupMetrics:
    """:class:`Metrics` per group of records (by the tuple of their ``keys`` values,
    missing: ``None``), in first-seen order, fed one record at a time."""

    def __init__(self, keys: tuple[str, ...], slos: Mapping[str, float] | None = None) -> None:
        self.keys, self.slos = keys, slos
        self.groups: dict[tuple, Metrics] = {}

    def add(self, r: dict) -> None:
        self.groups.setdefault(tuple(r.get(k) for k in self.keys), Metrics(self.slos)).add(r)

    def rows(self, duration_s: float) -> list[dict]:
        """One row per group: the ``keys`` fields, then its metrics. Throughputs use the
        whole run's ``duration_s``, so a group's throughput is its share."""
        return [{**dict(zip(self.keys, values)), **m.result(duration_s)}
                for values, m in self.groups.items()]
