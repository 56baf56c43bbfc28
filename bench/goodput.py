"""Goodput: service-level objectives on TTFT, TPOT and E2EL, as ``vllm bench serve`` has them.

``--goodput ttft:500 tpot:50`` gives objectives in milliseconds, parsed and checked as
``parse_goodput`` and ``check_goodput_args`` in ``vllm/benchmarks/serve.py`` do (names
``ttft``, ``tpot``, ``e2el``; non-negative values). A request is good when it succeeded and
each of its values is within its objective, TPOT taken as 0 for a request with at most one
output token (``calculate_metrics``); ``request_goodput`` is good requests per second of the
run. ``slo_attainment`` (the share of the requests sent that were good: a failed request
misses its objectives) is saltbench's, as AIPerf and GuideLLM report it.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.errors import BenchError

#: The objectives ``vllm bench serve --goodput`` accepts, in its order.
SLO_NAMES = ("ttft", "tpot", "e2el")


def parse_slos(pairs: list[str], where: str = "--goodput") -> dict[str, float]:
    """``KEY:MS`` pairs as objectives in milliseconds; a BenchError names ``where``."""
    slos: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        try:
            ms = float(value) if sep else None
        except ValueError:
            ms = None
        if ms is None:
            raise BenchError(f"{where}: {pair!r} is not KEY:MS (a metric name and a number "
                             "of milliseconds, e.g. ttft:500)")
        if name not in SLO_NAMES:
            raise BenchError(f"{where}: unknown objective {name!r} in {pair!r}; "
                             f"known: {', '.join(SLO_NAMES)}")
        if ms < 0:
            raise BenchError(f"{where}: {pair!r}: an objective must be non-negative")
        slos[name] = ms
    return slos


def request_values(r: Mapping) -> dict[str, float]:
    """A successful request's TTFT, TPOT (0 with at most one output token) and E2EL, ms."""
    n = int(r.get("output_tokens") or 0)
    tpot = (r["e2el_ms"] - r["ttft_ms"]) / (n - 1) if n > 1 else 0.0
    return {"ttft": r["ttft_ms"], "tpot": tpot, "e2el": r["e2el_ms"]}


def is_good(r: Mapping, slos: Mapping[str, float]) -> bool:
    """Whether request record ``r`` succeeded within every objective of ``slos``."""
    if not r["ok"]:
        return False
    values = request_values(r)
    return all(values[name] <= limit for name, limit in slos.items())


def describe(slos: Mapping[str, float]) -> str:
    """``ttft <= 500 ms, tpot <= 50 ms``: the objectives as a reader sees them."""
    return ", ".join(f"{name} <= {slos[name]:g} ms" for name in SLO_NAMES if name in slos)
