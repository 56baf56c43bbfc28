"""Headline metrics: the one place that says what each is, which way is better, how its
change is measured and what change a gate tolerates by default.

Names are the keys of :func:`bench.metrics.aggregate` (vLLM's ``vllm bench serve`` names
where one exists). A metric is either computed from requests (``reducer`` over per-request
``columns``: one value per repetition from its requests) or only per pass (throughputs: one
value per pass; leaked tokens: summed).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Which way is better.
LOWER, HIGHER, ZERO = "lower", "higher", "zero"
#: How a change is stated: relative (``%``) or in percentage points (``pp``).
RELATIVE, POINTS = "%", "pp"
#: Reducers over per-request columns.
MEAN, MEDIAN, P99, RATIO = "mean", "median", "p99", "ratio"


@dataclass(frozen=True)
class Metric:
    """One headline metric."""

    name: str
    label: str
    unit: str
    better: str  # LOWER | HIGHER | ZERO
    change: str = RELATIVE  # RELATIVE | POINTS
    #: Per-request column(s) and how they reduce (RATIO: sum(first) / sum(second)).
    columns: tuple[str, ...] = ()
    reducer: str | None = None
    #: Default gate: the tolerated change in the bad direction (a fraction, or points);
    #: None: reported, gated only where the user sets a threshold.
    threshold: float | None = 0.10
    #: Default gate of an A/B (paired, interleaved: much less noise); None: reported only.
    ab_threshold: float | None = None

    @property
    def per_request(self) -> bool:
        return self.reducer is not None

    def worse(self, change: float) -> float:
        """``change`` signed so that positive is worse."""
        return change if self.better == LOWER else -change


def _latency(key: str, reducer: str, label: str, threshold: float,
             ab_threshold: float | None = None) -> Metric:
    return Metric(f"{reducer}_{key}_ms", label, "ms", LOWER, RELATIVE, (f"{key}_ms",), reducer,
                  threshold, ab_threshold)


#: An A/B's default tolerance of its timing metrics (set from the power benchmark, see
#: docs/ab.md): a significant change beyond it fails, and the A/B is powered when it would
#: catch twice it.
AB_THRESHOLD = 0.05
#: Default thresholds: above the largest significant change between two runs of the same build
#: seen on a 2-core CPU with the tiny model (66 pairs, README "Compare and gate"); tighten
#: them where runs are steadier (a GPU, a larger model, more requests).
METRICS: dict[str, Metric] = {m.name: m for m in (
    _latency("ttft", MEAN, "mean TTFT", 0.40),
    _latency("ttft", MEDIAN, "median TTFT", 0.40, AB_THRESHOLD),
    _latency("ttft", P99, "P99 TTFT", 0.60),
    _latency("tpot", MEAN, "mean TPOT", 1.00),
    # an A/B gates the typical request's TPOT: on 2 cores whole passes decode 1.5-1.8x
    # slower or get all tokens in one chunk, so a unit's mean TPOT spread by 8% in two
    # same-build A/Bs, its median by 3.9-5.3% (docs/ab.md)
    _latency("tpot", MEDIAN, "median TPOT", 1.00, AB_THRESHOLD),
    _latency("tpot", P99, "P99 TPOT", 1.00),
    Metric("mean_itl_ms", "mean ITL", "ms", LOWER, RELATIVE, ("itl_sum_ms", "itl_count"), RATIO,
           1.00),
    _latency("e2el", MEAN, "mean E2EL", 0.60),
    _latency("e2el", P99, "P99 E2EL", 0.60),
    Metric("request_throughput", "request throughput", "req/s", HIGHER, threshold=0.40,
           ab_threshold=AB_THRESHOLD),
    Metric("output_throughput", "output throughput", "tok/s", HIGHER, threshold=0.40),
    Metric("hit_rate", "prefix-cache hit rate", "%", HIGHER, POINTS,
           ("cached_tokens", "prompt_tokens"), RATIO, 2.0, 2.0),
    # with service-level objectives only (--goodput; bench.goodput): per pass, a failed
    # request a miss; reported, gated where a threshold is set
    Metric("request_goodput", "request goodput", "req/s", HIGHER, threshold=None),
    Metric("slo_attainment", "SLO attainment", "%", HIGHER, POINTS, threshold=None),
    # summed over passes
    Metric("leaked_tokens", "leaked tokens", "tokens", ZERO, threshold=0.0, ab_threshold=0.0),
)}
