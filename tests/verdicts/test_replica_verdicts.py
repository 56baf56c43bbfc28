"""Judging behind a router: caches per replica, routing affinity, misdirection, load,
per-replica counter agreement and the problems that fail CI."""

from __future__ import annotations

from pathlib import Path

from run_dir import build

from bench.verdicts import prefix_model as pm
from bench.verdicts.replicas import load, routing
from bench.verdicts.requests import cache_domain
from bench.verdicts.runs import problems, replica_problems

B = 32
KEYS = ("k0", "k1", "k2")  # a 100-token prompt: 3 full blocks, a full hit is 96 tokens


def _sent(i: int, salt: str | None, replica: str, start: float) -> pm.Sent:
    return pm.Sent(id=i, salt=(salt, replica), layout=pm.Layout(100, KEYS), start=start,
                   first_token=start + 0.1, end=start + 0.2, cached=0)


def test_cache_domain_adds_the_replica_behind_a_router() -> None:
    assert cache_domain({"salt_digest": "a"}) == "a"
    assert cache_domain({"salt_digest": "a", "replica": "r1"}) == ("a", "r1")


def test_routing_counts_repeats_that_stayed_and_misdirected_tenants() -> None:
    sent = [_sent(1, "A", "r0", 0.0),   # A's prefix lands on r0
            _sent(2, "B", "r0", 1.0),   # B's identical prefix, sent to A's replica: misdirected
            _sent(3, "C", "r1", 2.0),   # C could have gone to r0 too: it did not
            _sent(4, "A", "r0", 3.0),   # A again, with its prefix: stayed (r1 holds C's only)
            _sent(5, "A", "r1", 4.0)]   # A again, on C's replica: lost its hit, misdirected
    assert routing(sent, ["r0", "r1"], B) == {
        "repeats": 2, "stayed": 1, "lost_tokens": 96, "exposed": 4, "misdirected": 2,
        "misdirected_by_chance": 2.0}


def test_load_and_imbalance() -> None:
    records = [{"replica": "r0"}] * 3 + [{"replica": "r1"}] + [{"replica": None}]
    assert load(records, ["r0", "r1"]) == {"requests": {"r0": 3, "r1": 1}, "unattributed": 1,
                                           "imbalance": 1.5}


def _record(seq: int, replica: str | None, cached: int, salt: str = "A") -> dict:
    return {"seq": seq, "phase": "measure", "pass": 0, "path": "chat", "salt_mode": "salted",
            "salt_digest": salt, "request_id": f"q{seq}", "case": "c", "tenant": "t",
            "modality": "text", "oracle": "full", "segment": 0, "start_s": float(seq),
            "end_s": seq + 0.5, "ok": True, "prompt_tokens": 100, "cached_tokens": cached,
            "output_tokens": 1, "build_ms": 0.0, "ttft_ms": 100.0, "replica": replica}


def _judged(tmp_path: Path, records: list[dict], deltas: dict) -> dict:
    """The results of ``records`` (one pass, every prompt the same), judged per replica."""
    layouts = [{"pass": 0, "request_id": r["request_id"], "n_tokens": 100,
                "block_keys": list(KEYS)} for r in records]
    return build(tmp_path, records, layouts, B,
                 replicas={"attribution": "response-header", "counters": deltas})


def _judgements(results: dict) -> tuple:
    c = results["judgements"]["counts"]
    return c["met"], c["leak"], c["unjudged"], c["no-layout"]


def test_a_repeat_on_another_replica_is_met_with_zero_and_a_hit_there_is_a_leak(
        tmp_path: Path) -> None:
    records = [_record(1, "r0", 0), _record(2, "r1", 0), _record(3, "r0", 96),
               _record(4, "r1", 96, salt="B")]  # B cannot hit on r1: only A's prefix is there
    deltas = {"r0": {"vllm:prefix_cache_queries_total": 200, "vllm:prefix_cache_hits_total": 96},
              "r1": {"vllm:prefix_cache_queries_total": 200, "vllm:prefix_cache_hits_total": 90}}
    results = _judged(tmp_path, records, deltas)
    assert _judgements(results) == (3, 1, 0, 0)
    assert [p["seq"] for p in results["judgements"]["problems"]] == [4]
    row = results["replicas"]["passes"][0]
    assert row["per_replica"]["r0"]["agree"] is True
    assert row["per_replica"]["r1"]["agree"] is False  # 96 reported, 90 counted
    assert (row["per_replica"]["r1"]["leaks"], row["per_replica"]["r1"]["leaked_tokens"]) == (1, 96)
    assert replica_problems(results) == [
        "replica counters disagree with the requests served there: chat/salted on r1"]


def test_an_unattributed_request_may_have_supplied_its_salt_anywhere(tmp_path: Path) -> None:
    """A request no replica claims is not judged and is a problem; it widens its salt's
    bounds on every replica (it may have been served by any), never another salt's."""
    records = [_record(1, "r0", 0), _record(2, None, 96), _record(3, "r1", 96),
               _record(4, "r0", 96, salt="B")]
    results = _judged(tmp_path, records, {"r0": {}, "r1": {}})
    assert _judgements(results) == (1, 1, 1, 1)  # 3 is unjudged, 4 a leak
    assert results["judgements"]["counts"]["unjudged_unknown_source"] == 1
    assert results["replicas"]["passes"][0]["unattributed"] == 1
    assert "1 measured request(s) could not be attributed to a replica" in problems(results)


def test_the_single_cache_oracle_is_not_compared_behind_a_router(tmp_path: Path) -> None:
    records = [_record(1, "r0", 0), _record(2, "r1", 0)]
    assert _judged(tmp_path, records, {})["oracle"]["compared"] == 0
