"""Server counters against the requests' own tokens: what must agree, what is information."""

from __future__ import annotations

from bench.verdicts.runs import counters_agree, counters_exact

PER_REQUEST = {"vllm:prompt_tokens_total": 300.0, "vllm:prompt_tokens_cached_total": 96.0,
               "vllm:prompt_tokens_by_source_total{source=local_cache_hit}": 96.0,
               "vllm:prompt_tokens_by_source_total{source=external_kv_transfer}": 0.0}


def delta(queries: float, hits: float, **per_request: float) -> dict[str, float]:
    return {"vllm:prefix_cache_queries_total": queries, "vllm:prefix_cache_hits_total": hits,
            **PER_REQUEST, **per_request}


def test_a_retried_waiting_request_does_not_fail_a_correct_run() -> None:
    """A waiting request the scheduler retried (KV or encoder budget full) was looked up in
    the prefix cache twice, on vLLM versions that count every lookup: queries and hits
    exceed the requests', the once-per-request counters do not."""
    retried = delta(queries=400, hits=128)
    assert counters_agree(retried, 300, 96) is True
    assert counters_exact(retried, 300, 96) is False
    assert counters_agree(delta(300, 96), 300, 96) is True
    assert counters_exact(delta(300, 96), 300, 96) is True


def test_what_cannot_double_count_must_agree() -> None:
    assert counters_agree(delta(300, 96, **{"vllm:prompt_tokens_cached_total": 64.0}),
                          300, 96) is False
    assert counters_agree(delta(300, 96, **{"vllm:prompt_tokens_total": 299.0}), 300, 96) is False
    # Queries and hits can only be counted more often than requests, never less.
    assert counters_agree(delta(299, 96), 300, 96) is False
    assert counters_agree(delta(300, 95), 300, 96) is False


def test_by_source_when_the_cached_counter_is_missing() -> None:
    without = delta(300, 96)
    del without["vllm:prompt_tokens_cached_total"]
    assert counters_agree(without, 300, 96) is True
    assert counters_agree(without, 300, 64) is False


def test_without_per_request_counters_queries_and_hits_must_be_exact() -> None:
    """Fail closed: nothing else to check the requests against."""
    bare = {"vllm:prefix_cache_queries_total": 400.0, "vllm:prefix_cache_hits_total": 128.0}
    assert counters_agree(bare, 300, 96) is False
    assert counters_agree({**bare, "vllm:prefix_cache_queries_total": 300.0,
                           "vllm:prefix_cache_hits_total": 96.0}, 300, 96) is True
    assert counters_agree({}, 300, 96) is None
    assert counters_agree(bare, None, 96) is None
