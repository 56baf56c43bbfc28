import numpy as np
import pytest

from bench.metrics import GroupMetrics, aggregate, group_by

A = {"ok": True, "prompt_tokens": 100, "cached_tokens": 60, "output_tokens": 3, "ttft_ms": 10.0,
     "itl_ms": [4.0, 6.0], "e2el_ms": 20.0, "expected_cached_tokens": 64, "salt": "a", "mode": "img"}
B = {"ok": True, "prompt_tokens": 50, "cached_tokens": 0, "output_tokens": 1, "ttft_ms": 30.0,
     "itl_ms": [], "e2el_ms": 30.0, "expected_cached_tokens": 0, "salt": "b", "mode": "img"}
C = {"ok": True, "prompt_tokens": 10, "cached_tokens": 8, "output_tokens": 5, "ttft_ms": 5.0,
     "itl_ms": [1.0, 2.0, 3.0, 4.0], "e2el_ms": 15.0, "salt": "a", "mode": "audio"}
FAILED = {"ok": False, "prompt_tokens": None, "cached_tokens": None, "output_tokens": None,
          "ttft_ms": None, "itl_ms": [], "e2el_ms": None, "salt": "b", "mode": "img"}
RECORDS = [A, B, C, FAILED]


def test_counts_totals_and_throughput():
    m = aggregate(RECORDS, duration_s=2.0)
    assert (m["completed"], m["failed"]) == (3, 1)
    assert (m["total_input_tokens"], m["total_output_tokens"]) == (160, 9)
    assert m["request_throughput"] == 3 / 2.0
    assert m["output_throughput"] == 9 / 2.0
    assert m["total_token_throughput"] == (160 + 9) / 2.0


def test_tpot_only_for_multi_token_requests():
    m = aggregate(RECORDS, 2.0)
    tpots = [(20.0 - 10.0) / (3 - 1), (15.0 - 5.0) / (5 - 1)]  # B has one output token
    assert m["mean_tpot_ms"] == pytest.approx(np.mean(tpots)) == pytest.approx(3.75)
    assert m["std_tpot_ms"] == pytest.approx(1.25)  # population std, as numpy's default
    assert m["p90_tpot_ms"] == pytest.approx(2.5 + 0.9 * 2.5)  # linear interpolation


def test_itl_is_flattened_over_requests():
    m = aggregate(RECORDS, 2.0)
    assert m["mean_itl_ms"] == pytest.approx(20.0 / 6)
    assert m["median_itl_ms"] == m["p50_itl_ms"] == pytest.approx(3.5)
    assert m["p99_itl_ms"] == pytest.approx(4.0 + 0.95 * 2.0)


def test_ttft_and_e2el_exclude_failed():
    m = aggregate(RECORDS, 2.0)
    assert m["mean_ttft_ms"] == pytest.approx(15.0) and m["median_ttft_ms"] == 10.0
    assert m["mean_e2el_ms"] == pytest.approx(65.0 / 3) and m["median_e2el_ms"] == 20.0


def test_prefix_cache_keys():
    m = aggregate(RECORDS, 2.0)
    assert (m["prompt_tokens"], m["cached_tokens"]) == (160, 68)
    assert m["hit_rate"] == pytest.approx(68 / 160)
    assert m["expected_cached_tokens"] == 64
    assert m["hit_fraction_of_expected"] == pytest.approx(60 / 64)  # only A and B expect


def test_no_successes_gives_none_not_errors():
    for records in ([], [FAILED]):
        m = aggregate(records, 1.0)
        assert m["completed"] == 0 and m["request_throughput"] == 0.0
        assert m["mean_ttft_ms"] is None and m["p99_itl_ms"] is None and m["std_tpot_ms"] is None
        assert m["hit_rate"] is None and m["expected_cached_tokens"] is None
        assert m["hit_fraction_of_expected"] is None


def test_missing_cached_tokens_gives_no_hit_rate():
    m = aggregate([{**A, "cached_tokens": None}, B], 1.0)
    assert m["cached_tokens"] is None and m["hit_rate"] is None


def test_group_by_and_group_metrics():
    groups = group_by(RECORDS, ("mode",))
    assert groups == {("img",): [A, B, FAILED], ("audio",): [C]}
    grouped = GroupMetrics(("salt", "mode"))
    for r in RECORDS:
        grouped.add(r)
    rows = grouped.rows(2.0)
    assert [(r["salt"], r["mode"], r["completed"], r["failed"]) for r in rows] == [
        ("a", "img", 1, 0), ("b", "img", 1, 1), ("a", "audio", 1, 0)
    ]
    assert rows[0]["mean_tpot_ms"] == 5.0 and rows[1]["mean_tpot_ms"] is None
    assert rows[0]["request_throughput"] == 0.5


def test_goodput_counts_requests_within_every_objective():
    # A: ttft 10, tpot 5, e2el 20; B: ttft 30, one token (tpot 0), e2el 30; C: ttft 5, tpot 2.5
    m = aggregate(RECORDS, 2.0, {"ttft": 10.0, "tpot": 5.0})  # A and C (limits inclusive)
    assert m["good_requests"] == 2
    assert m["request_goodput"] == 2 / 2.0
    assert m["slo_attainment"] == 2 / 4  # the failed request missed its objectives
    assert aggregate(RECORDS, 2.0, {"tpot": 0.0})["good_requests"] == 1  # B: one token
    assert aggregate(RECORDS, 2.0, {"e2el": 19.9})["good_requests"] == 1  # C only


def test_no_objectives_no_goodput():
    m = aggregate(RECORDS, 2.0)
    assert m["good_requests"] is m["request_goodput"] is m["slo_attainment"] is None


def test_goodput_per_group():
    grouped = GroupMetrics(("mode",), {"ttft": 10.0})
    for r in RECORDS:
        grouped.add(r)
    by_mode = {row["mode"]: row for row in grouped.rows(2.0)}
    assert (by_mode["img"]["good_requests"], by_mode["img"]["slo_attainment"]) == (1, 1 / 3)
    assert (by_mode["audio"]["good_requests"], by_mode["audio"]["request_goodput"]) == (1, 0.5)
