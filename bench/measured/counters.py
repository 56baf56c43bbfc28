"""vLLM's server-side cache counters from ``GET /metrics``, summed over models and engines."""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from bench.errors import BenchError

log = logging.getLogger(__name__)

#: Prefix-cache lookups and hits (tokens); prompt and cached tokens, once per request.
QUERIES, HITS = "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"
PROMPT, CACHED = "vllm:prompt_tokens_total", "vllm:prompt_tokens_cached_total"
COUNTERS = frozenset(
    {
        QUERIES,
        HITS,
        CACHED,
        "vllm:mm_cache_queries_total",
        "vllm:mm_cache_hits_total",
        PROMPT,
        "vllm:request_success_total",
    }
)
#: Kept per ``source`` label, as ``vllm:prompt_tokens_by_source_total{source=local_cache_hit}``.
BY_SOURCE = "vllm:prompt_tokens_by_source_total"
#: The server process's start time (prometheus_client's process collector): a restart
#: changes it even when the new counters have already grown past the old ones.
START_TIME = "process_start_time_seconds"


class CountersReset(BenchError):
    """The server's counters went back between two scrapes: it restarted."""


def parse(text: str) -> dict[str, float]:
    """The tracked counters in a Prometheus text exposition; absent counters stay absent."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:  # sample names keep "_total"; "_created" ones are skipped
            if sample.name in COUNTERS or sample.name == START_TIME:
                key = sample.name
            elif sample.name == BY_SOURCE:
                key = f"{BY_SOURCE}{{source={sample.labels.get('source', '')}}}"
            else:
                continue
            totals[key] = totals.get(key, 0.0) + sample.value
    return totals


async def scrape(session: aiohttp.ClientSession, base_url: str) -> dict[str, float]:
    """``parse`` of ``{base_url}/metrics``; raises ``BenchError`` if the server does not answer."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as response:
            if response.status != 200:
                raise BenchError(f"GET {url}: HTTP {response.status}")
            text = await response.text()
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        raise BenchError(f"GET {url} failed: {type(exc).__name__}: {exc}") from exc
    return parse(text)


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """How much each counter in ``after`` grew since ``before`` (absent before: from 0).

    Raises :class:`CountersReset` when the server restarted in between (its start time
    changed, or a counter went back): such a delta would mix two servers' counts.
    """
    if before.get(START_TIME) != after.get(START_TIME):
        raise CountersReset("the server restarted between two /metrics scrapes (its "
                            "process start time changed); its counters were reset")
    went_back = sorted(k for k, v in after.items() if v < before.get(k, 0.0))
    gone = sorted(k for k in before if k not in after)
    if went_back or gone:
        raise CountersReset(f"server counters went back ({', '.join(went_back + gone)}): "
                            "the server restarted and its counters were reset")
    return {key: value - before.get(key, 0.0) for key, value in after.items()
            if key != START_TIME}


async def settled_scrape(
    session: aiohttp.ClientSession,
    base_url: str,
    *,
    interval_s: float = 0.25,
    timeout_s: float = 10,
) -> dict[str, float]:
    """Scrape every ``interval_s`` until two scrapes in a row agree, and return the last.

    vLLM updates its counters asynchronously after responses are sent; after ``timeout_s``
    the last scrape is returned with a warning.
    """
    deadline = time.monotonic() + timeout_s
    last = await scrape(session, base_url)
    while True:
        await asyncio.sleep(interval_s)
        current = await scrape(session, base_url)
        if current == last:
            return current
        last = current
        if time.monotonic() >= deadline:
            log.warning("%s/metrics still changing after %g s; using the last scrape", base_url, timeout_s)
            return last


def counter_hit_rate(counters: dict[str, float]) -> float | None:
    """Prefix-cache hits / queries (tokens), ``None`` without queries."""
    queries = counters.get(QUERIES)
    if not queries:
        return None
    return counters.get(HITS, 0.0) / queries
