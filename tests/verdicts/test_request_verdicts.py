"""Every request judged from records and layouts, and the problems that fail a run (no server)."""

from __future__ import annotations

from in_memory import judge_records, oracle_agreement

from bench.verdicts.prefix_model import layout
from bench.verdicts.requests import full_hit_tokens
from bench.verdicts.runs import problems

B = 4


def test_full_hit_is_whole_blocks_of_n_minus_one() -> None:
    assert full_hit_tokens(99, 32) == 96
    assert full_hit_tokens(97, 32) == 96
    assert full_hit_tokens(96, 32) == 64
    assert full_hit_tokens(1, 32) == 0


def _record(seq: int, rid: str, salt: str | None, cached: int, n: int, start: float,
            ok: bool = True, **kw) -> dict:
    return {"seq": seq, "pass": 0, "phase": "measure", "path": "chat", "modality": "text",
            "salt_mode": "salted", "request_id": rid, "salt_digest": salt, "ok": ok,
            "prompt_tokens": n, "cached_tokens": cached if ok else None, "start_s": start,
            "build_ms": 0.0, "ttft_ms": 10.0 if ok else None, "end_s": start + 0.05,
            "oracle": kw.pop("oracle", "none"), **kw}


def _shape(rid: str, tokens: list[int]) -> dict:
    shape = layout(tokens, [], B)
    return {"pass": 0, "request_id": rid, "n_tokens": shape.n_tokens,
            "block_keys": list(shape.block_keys)}


SYSTEM = list(range(8))  # two blocks shared by every prompt of the pass


def test_shared_system_prompt_repeats_and_salts_are_all_judged() -> None:
    a, b = [*SYSTEM, 20, 21, 22, 23, 24], [*SYSTEM, 30, 31, 32, 33, 34]
    records = [_record(1, "r1", "A", 0, 13, 0.0), _record(2, "r2", "A", 8, 13, 1.0, oracle="partial"),
               _record(3, "r1", "A", 12, 13, 2.0, oracle="full"),
               _record(4, "r1", "B", 0, 13, 3.0)]
    layouts = [_shape("r1", a), _shape("r2", b)]
    out = judge_records(records, layouts, B, kv_capacity_blocks=100)
    assert [r["judgement"] for r in records] == ["met"] * 4
    assert [r["expected_cached_tokens"] for r in records] == [0, 8, 12, 0]
    assert out["counts"]["judged"] == out["counts"]["requests"] == 4
    assert out["eviction_possible"] is False and out["problems"] == []
    agreement = oracle_agreement(records, primed=False, block_size=B)
    assert (agreement["compared"], agreement["agreed"]) == (3, 3)  # the oracle's full and none


def test_leak_and_under_hit_are_summed_apart() -> None:
    a = [*SYSTEM, 20, 21, 22, 23, 24]
    records = [_record(1, "r1", "A", 0, 13, 0.0), _record(2, "r1", "B", 12, 13, 1.0),
               _record(3, "r1", "A", 4, 13, 2.0), _record(4, "r1", "A", 0, 13, 3.0, ok=False)]
    out = judge_records(records, [_shape("r1", a)], B, kv_capacity_blocks=None)
    assert [r["judgement"] for r in records] == ["met", "leak", "under-hit", "failed"]
    c = out["counts"]
    assert (c["leak"], c["under-hit"], c["failed"], c["judged"]) == (1, 1, 1, 3)
    assert (c["leaked_tokens"], c["missing_tokens"]) == (12, 8)
    assert out["eviction_possible"] is None
    assert [p["judgement"] for p in out["problems"]] == ["leak", "under-hit"]


def test_a_pass_with_a_missing_layout_is_not_judged() -> None:
    records = [_record(1, "r1", "A", 0, 13, 0.0), _record(2, "r2", "A", 8, 13, 1.0)]
    out = judge_records(records, [_shape("r1", [*SYSTEM, 1, 2, 3, 4, 5])], B, None)
    assert [r["judgement"] for r in records] == ["no-layout", "no-layout"]
    assert out["counts"]["judged"] == out["counts"]["unjudged"] == 0
    assert out["counts"]["no-layout"] == 2
    assert all(r["expected_cached_tokens"] is None for r in records)


def _results(**judgement_counts) -> dict:
    counts = {"leak": 0, "under-hit": 0, "leaked_tokens": 0, "missing_tokens": 0,
              **judgement_counts}
    return {"passes": [{"failed": 0, "counters_agree": True, "path": "chat",
                        "salt_mode": "none"}],
            "judgements": {"counts": counts, "eviction_possible": False},
            "prompt_token_mismatches": [], "interrupted": False}


def test_run_problems_fail_a_ci_step() -> None:
    assert problems(_results()) == []
    bad = _results(leak=2, leaked_tokens=64, **{"under-hit": 1}, missing_tokens=32)
    bad["passes"] += [{"failed": 3, "counters_agree": False, "path": "generate-parts",
                       "salt_mode": "salted"}]
    bad["prompt_token_mismatches"] = [{}]
    bad["interrupted"] = True
    assert problems(bad) == [
        "3 measured request(s) failed",
        "2 request(s) got more cached tokens than the salt rules allow (64 tokens leaked)",
        "1 request(s) got fewer cached tokens than completed requests guarantee (32 tokens; "
        "eviction not possible at this KV capacity)",
        "server counters disagree with the requests' cached tokens on pass(es) "
        "generate-parts/salted",
        "1 request(s) have different prompt token counts on different paths",
        "the run was interrupted"]
