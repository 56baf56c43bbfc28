"""Every request judged from records and layouts written to a run directory, through the
real results code, and the problems that fail a run (no server)."""

from __future__ import annotations

from pathlib import Path

from run_dir import build

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
            "prompt_tokens": n if ok else None, "cached_tokens": cached if ok else None,
            "start_s": start, "build_ms": 0.0, "ttft_ms": 10.0 if ok else None,
            "end_s": start + 0.05, "oracle": kw.pop("oracle", "none"),
            **({} if ok else {"failure": "http-5xx", "error": "HTTP 500"}), **kw}


def _shape(rid: str, tokens: list[int]) -> dict:
    shape = layout(tokens, [], B)
    return {"pass": 0, "request_id": rid, "n_tokens": shape.n_tokens,
            "block_keys": list(shape.block_keys)}


def _counts(results: dict, *keys: str) -> tuple[int, ...]:
    return tuple(results["judgements"]["counts"][k] for k in keys)


SYSTEM = list(range(8))  # two blocks shared by every prompt of the pass


def test_shared_system_prompt_repeats_and_salts_are_all_judged(tmp_path: Path) -> None:
    a, b = [*SYSTEM, 20, 21, 22, 23, 24], [*SYSTEM, 30, 31, 32, 33, 34]
    records = [_record(1, "r1", "A", 0, 13, 0.0), _record(2, "r2", "A", 8, 13, 1.0, oracle="partial"),
               _record(3, "r1", "A", 12, 13, 2.0, oracle="full"),
               _record(4, "r1", "B", 0, 13, 3.0)]
    out = build(tmp_path, records, [_shape("r1", a), _shape("r2", b)], B, kv_capacity_blocks=100)
    assert _counts(out, "requests", "judged", "met") == (4, 4, 4)
    assert out["passes"][0]["expected_cached_tokens"] == 0 + 8 + 12 + 0
    assert out["judgements"]["eviction_possible"] is False
    assert out["judgements"]["problems"] == [] and problems(out) == []
    # The oracle's full and none agree with the model's exact expectation.
    assert (out["oracle"]["compared"], out["oracle"]["agreed"]) == (3, 3)


def test_leak_and_under_hit_are_summed_apart(tmp_path: Path) -> None:
    a = [*SYSTEM, 20, 21, 22, 23, 24]
    records = [_record(1, "r1", "A", 0, 13, 0.0), _record(2, "r1", "B", 12, 13, 1.0),
               _record(3, "r1", "A", 4, 13, 2.0), _record(4, "r1", "A", 0, 13, 3.0, ok=False)]
    out = build(tmp_path, records, [_shape("r1", a)], B)
    assert _counts(out, "met", "leak", "under-hit", "failed", "judged") == (1, 1, 1, 1, 3)
    assert _counts(out, "leaked_tokens", "missing_tokens") == (12, 8)
    assert out["judgements"]["eviction_possible"] is None
    assert [(p["seq"], p["judgement"], p["cached_lower"], p["cached_upper"])
            for p in out["judgements"]["problems"]] == [(2, "leak", 0, 0), (3, "under-hit", 12, 12)]


def test_a_missing_layout_leaves_the_other_requests_judged(tmp_path: Path) -> None:
    """One failed render used to switch judging off for the whole pass, and a cross-salt hit
    in it went unseen (exit 0). Now: the request without a layout is counted and may only
    have supplied its own salt's later requests; another salt's hit is still a leak."""
    prompt = [*SYSTEM, 20, 21, 22, 23, 24]
    records = [_record(1, "r1", "A", 0, 13, 0.0),  # its render failed
               _record(2, "r2", "A", 12, 13, 1.0),  # r1 may have cached its blocks
               _record(3, "r2", "B", 12, 13, 2.0),  # no B source: a leak
               _record(4, "r3", "B", 0, 13, 3.0)]
    layouts = [{"pass": 0, "request_id": "r1", "error": "HTTP 500"}, _shape("r2", prompt),
               _shape("r3", [*range(50, 63)])]
    out = build(tmp_path, records, layouts, B)
    assert _counts(out, "no-layout", "unjudged", "unjudged_unknown_source", "leak", "met",
                   "judged") == (1, 1, 1, 1, 1, 2)
    assert [(p["seq"], p["judgement"]) for p in out["judgements"]["problems"]] == [(3, "leak")]
    assert problems(out) == [
        "1 request(s) got more cached tokens than the salt rules allow (12 tokens leaked)",
        "2 request(s) could not be judged exactly, so a leak there would go unseen (1 without "
        "a layout, 1 after a request without one, 0 with a source in flight); "
        "--allow-unjudged accepts them"]


def test_a_layout_of_another_length_is_unknown_and_bounded_by_the_reported_length(
        tmp_path: Path) -> None:
    """The server reported 9 prompt tokens for r1 but its render has 13: unknown layout; as
    a source it reaches 2 blocks (9 prompt + 1 output token: KV for 9)."""
    records = [_record(1, "r1", "A", 0, 9, 0.0), _record(2, "r2", "A", 8, 13, 1.0),
               _record(3, "r3", "A", 12, 13, 2.0)]
    prompt = [*SYSTEM, 20, 21, 22, 23, 24]
    layouts = [_shape("r1", prompt), _shape("r2", prompt), _shape("r3", prompt)]
    out = build(tmp_path, records, layouts, B)
    # r2: upper 8 from r1, lower 0: unjudged; r3: r2 completed before it: 12, met.
    assert _counts(out, "no-layout", "unjudged_unknown_source", "met") == (1, 1, 1)
    twelve = build(tmp_path, [*records[:1], _record(2, "r2", "A", 12, 13, 1.0)], layouts, B)
    assert _counts(twelve, "leak", "leaked_tokens") == (1, 4)


def test_unjudged_requests_fail_the_run_unless_allowed(tmp_path: Path) -> None:
    """A twin in flight leaves a request between its bounds: a problem unless the run
    allows it. Blocks only an earlier turn's output may have filled are no problem: every
    multi-turn workload has them."""
    prompt = [*SYSTEM, 20, 21, 22, 23, 24]
    twins = [_record(1, "r1", "A", 0, 13, 0.0), _record(2, "r1", "A", 0, 13, 0.02)]
    out = build(tmp_path, twins, [_shape("r1", prompt)], B)
    assert _counts(out, "unjudged", "unjudged_output_blocks", "unjudged_unknown_source") == (1, 0, 0)
    assert problems(out) == [
        "1 request(s) could not be judged exactly, so a leak there would go unseen (0 without "
        "a layout, 0 after a request without one, 1 with a source in flight); "
        "--allow-unjudged accepts them"]
    allowed = build(tmp_path, twins, [_shape("r1", prompt)], B, options={"allow_unjudged": True})
    assert problems(allowed) == []
    # Turn 1: 6 prompt tokens (1 block) and 5 output tokens fill block 1; turn 2 may hit it.
    turns = [_record(1, "t1", "A", 0, 6, 0.0, output_tokens=5), _record(2, "t2", "A", 4, 16, 1.0)]
    out = build(tmp_path, turns, [_shape("t1", list(range(6))),
                                  _shape("t2", [*range(6), *range(50, 60)])], B)
    assert _counts(out, "unjudged", "unjudged_output_blocks") == (1, 1)
    assert problems(out) == []


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
