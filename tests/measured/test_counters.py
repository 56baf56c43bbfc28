import asyncio
import logging

import aiohttp
import pytest
from fakeserver import metrics_text

from bench.errors import BenchError
from bench.measured.counters import (
    START_TIME,
    CountersReset,
    counter_hit_rate,
    delta,
    parse,
    scrape,
    settled_scrape,
)


def test_parse_sums_engines_keeps_sources_and_skips_created():
    assert parse(metrics_text(1.0)) == {
        "vllm:prefix_cache_queries_total": 200.0,
        "vllm:prefix_cache_hits_total": 75.0,
        "vllm:prompt_tokens_by_source_total{source=local_compute}": 75.0,
        "vllm:prompt_tokens_by_source_total{source=local_cache_hit}": 50.0,
        "vllm:prompt_tokens_by_source_total{source=external_kv_transfer}": 0.0,
        "vllm:request_success_total": 3.0,
    }


def test_delta_and_hit_rate():
    before, after = parse(metrics_text(1.0)), parse(metrics_text(3.0))
    d = delta(before, after)
    assert d["vllm:prefix_cache_queries_total"] == 200.0
    assert d["vllm:prefix_cache_hits_total"] == 100.0
    assert d["vllm:prompt_tokens_by_source_total{source=local_compute}"] == 0.0
    assert delta({}, {"x": 2.0}) == {"x": 2.0}
    assert counter_hit_rate(d) == 0.5
    assert counter_hit_rate({}) is None
    assert counter_hit_rate({"vllm:prefix_cache_queries_total": 0.0}) is None


def test_a_restarted_server_gives_no_delta():
    """Counters that went back, or a new process start time, are a restart: never a
    negative or mixed delta."""
    before, after = parse(metrics_text(3.0)), parse(metrics_text(1.0))
    with pytest.raises(CountersReset, match="went back .*vllm:prefix_cache_hits_total"):
        delta(before, after)
    grown = parse(metrics_text(5.0))
    assert delta({**before, START_TIME: 100.0}, {**grown, START_TIME: 100.0})
    with pytest.raises(CountersReset, match="process start time changed"):
        delta({**before, START_TIME: 100.0}, {**grown, START_TIME: 250.0})
    assert START_TIME not in delta({**before, START_TIME: 1.0}, {**grown, START_TIME: 1.0})
    assert START_TIME in parse("# TYPE process_start_time_seconds gauge\n"
                               "process_start_time_seconds 1.7e9\n")


def run(coro_fn):
    async def go():
        async with aiohttp.ClientSession() as session:
            return await coro_fn(session)

    return asyncio.run(go())


def test_settled_scrape_waits_until_counters_stop(fake_server):
    counters = run(lambda s: settled_scrape(s, fake_server.url + "/settling", interval_s=0.01))
    assert counters["vllm:prefix_cache_queries_total"] == 400.0  # the value after it settled


def test_settled_scrape_times_out_with_warning(fake_server, caplog):
    with caplog.at_level(logging.WARNING):
        counters = run(lambda s: settled_scrape(s, fake_server.url + "/forever", interval_s=0.01,
                                                timeout_s=0.1))
    assert counters["vllm:request_success_total"] > 3.0
    assert "still changing" in caplog.text


def test_scrape_http_error_is_a_bench_error(fake_server):
    with pytest.raises(BenchError, match="/no/such/metrics: HTTP 404"):
        run(lambda s: scrape(s, fake_server.url + "/no/such"))
