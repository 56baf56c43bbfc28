"""Exact numbers of the prefix-cache model on hand-made prompts (block size 4)."""

from __future__ import annotations

import math
import random
import time

import pytest

from bench.verdicts.prefix_model import Judgement, Layout, MediaSpan, Sent, judge, layout

B = 4


def toks(n: int, base: int = 0) -> list[int]:
    """n distinct token ids from base on."""
    return list(range(base, base + n))


def lay(token_ids: list[int], *media: MediaSpan) -> Layout:
    return layout(token_ids, media, B)


def req(rid: int, lay_: Layout | None, start: float, *, end: float | None = None,
        first: float | None = None, cached: int | None = 0, salt: str | None = None) -> Sent:
    """A request that completes 1 s after it starts, its first token 0.1 s in, unless told."""
    if end is None and cached is not None:
        end = start + 1
    if first is None and end is not None:
        first = start + 0.1
    return Sent(rid, salt, lay_, start, first, end, cached)


def one(sent: list[Sent], rid: int) -> Judgement:
    return judge(sent, B)[rid]


# --- layout ---------------------------------------------------------------------------

def test_layout_keys_full_blocks_only():
    out = lay(toks(11))
    assert out.n_tokens == 11
    assert len(out.block_keys) == 2
    assert all(len(k) == 16 and int(k, 16) >= 0 for k in out.block_keys)
    assert lay(toks(3)).block_keys == ()


def test_layout_chained_and_deterministic():
    a, b = lay(toks(12)), lay(toks(12))
    assert a == b
    changed = lay(toks(4) + [99] + toks(7, 5))  # block 1 differs
    assert changed.block_keys[0] == a.block_keys[0]
    assert changed.block_keys[1:] != a.block_keys[1:]
    assert changed.block_keys[2] != a.block_keys[2]  # the chain carries the change on
    assert lay(toks(4, 8)).block_keys[0] != a.block_keys[2]  # same tokens, other parent


def test_layout_media_keys_every_overlapped_block():
    plain = lay(toks(16))
    span = lay(toks(16), MediaSpan(offset=6, length=4, identity="img"))  # blocks 1 and 2
    assert span.block_keys[0] == plain.block_keys[0]
    assert all(s != p for s, p in zip(span.block_keys[1:], plain.block_keys[1:]))
    assert lay(toks(16), MediaSpan(6, 4, "img")) == span
    assert lay(toks(16), MediaSpan(6, 4, "other")).block_keys[1] != span.block_keys[1]
    assert lay(toks(16), MediaSpan(6, 0, "empty")) == plain  # an empty span overlaps nothing


def test_layout_media_order_irrelevant():
    spans = [MediaSpan(1, 2, "a"), MediaSpan(2, 1, "b")]
    assert layout(toks(8), spans, B) == layout(toks(8), spans[::-1], B)


def test_layout_rejects_bad_block_size():
    with pytest.raises(ValueError):
        layout(toks(8), [], 0)
    with pytest.raises(ValueError):
        judge([], 0)


# --- plain prompts --------------------------------------------------------------------

def test_identical_repeat_after_completion_is_full_hit():
    p = lay(toks(10))  # floor(9/4) = 2 blocks
    j = one([req(1, p, 0), req(2, p, 2, cached=8)], 2)
    assert (j.lower, j.upper, j.verdict, j.expected) == (8, 8, "met", 8)


def test_multiple_of_block_size_excludes_last_block():
    p = lay(toks(8))  # 2 full blocks cached, floor(7/4) = 1 may hit
    j = one([req(1, p, 0), req(2, p, 2, cached=4)], 2)
    assert (j.lower, j.upper, j.verdict) == (4, 4, "met")


def test_first_sighting_is_zero():
    got = judge([req(1, lay(toks(10)), 0)], B)
    assert got == {1: Judgement(0, 0, "met", 0, 0)}


def test_shared_system_prompt_hits_shared_blocks():
    system = toks(8, 100)
    a, b = lay(system + toks(5, 0)), lay(system + toks(5, 50))
    j = one([req(1, a, 0), req(2, b, 2, cached=8)], 2)
    assert (j.lower, j.upper, j.verdict) == (8, 8, "met")


def test_prefix_shorter_than_a_block_is_zero():
    a, b = lay(toks(3, 100) + toks(7, 0)), lay(toks(3, 100) + toks(7, 50))
    j = one([req(1, a, 0), req(2, b, 2)], 2)
    assert (j.lower, j.upper, j.verdict) == (0, 0, "met")


def test_multi_turn_hits_previous_turn_full_blocks():
    turn1 = toks(10)  # 2 full blocks
    turn2 = turn1 + toks(7, 200)  # 17 tokens: up to 4 blocks may hit
    j = one([req(1, lay(turn1), 0), req(2, lay(turn2), 2, cached=8)], 2)
    assert (j.lower, j.upper, j.verdict) == (8, 8, "met")


def test_leading_run_stops_at_first_missing_block():
    long = lay(toks(17))
    hole = lay(toks(4) + [999] + toks(12, 5))  # only block 0 shared with long
    j = one([req(1, hole, 0), req(2, long, 2, cached=4)], 2)
    assert (j.lower, j.upper) == (4, 4)


# --- media ----------------------------------------------------------------------------

def test_different_media_in_block_0_is_zero():
    ids = toks(13)
    src, r = lay(ids, MediaSpan(1, 2, "a")), lay(ids, MediaSpan(1, 2, "b"))
    assert one([req(1, src, 0), req(2, r, 2)], 2).upper == 0


def test_different_media_only_in_block_2_hits_blocks_0_1():
    ids = toks(17)
    src, r = lay(ids, MediaSpan(9, 2, "a")), lay(ids, MediaSpan(9, 2, "b"))
    j = one([req(1, src, 0), req(2, r, 2, cached=8)], 2)
    assert (j.lower, j.upper, j.verdict) == (8, 8, "met")


def test_same_media_identity_is_full_hit():
    ids = toks(17)
    src, r = lay(ids, MediaSpan(5, 6, "a")), lay(ids, MediaSpan(5, 6, "a"))
    assert one([req(1, src, 0), req(2, r, 2)], 2).expected == 16


def test_reencoded_twin_misses_from_the_media_block_on():
    ids = toks(17)  # same token ids, the media starts in block 1 and spans into block 2
    src, r = lay(ids, MediaSpan(5, 6, "v1")), lay(ids, MediaSpan(5, 6, "v1-reencoded"))
    j = one([req(1, src, 0), req(2, r, 2, cached=4)], 2)
    assert (j.lower, j.upper, j.verdict) == (4, 4, "met")


# --- salts ----------------------------------------------------------------------------

@pytest.mark.parametrize("src_salt, r_salt, hit", [
    ("A", "B", 0),
    ("A", None, 0),
    (None, "A", 0),
    ("A", "A", 8),
    (None, None, 8),
])
def test_salt_keys_block_0(src_salt, r_salt, hit):
    p = lay(toks(10))
    j = one([req(1, p, 0, salt=src_salt), req(2, p, 2, salt=r_salt, cached=hit)], 2)
    assert (j.lower, j.upper, j.verdict) == (hit, hit, "met")


def test_empty_salt_is_not_unsalted():
    p = lay(toks(10))
    assert one([req(1, p, 0, salt=""), req(2, p, 2, salt=None)], 2).upper == 0


def test_cross_salt_hit_is_a_leak():
    p = lay(toks(10))
    j = one([req(1, p, 0, salt="A"), req(2, p, 2, salt="B", cached=8)], 2)
    assert (j.verdict, j.upper, j.leaked_tokens, j.missing_tokens) == ("leak", 0, 8, 0)


# --- timing ---------------------------------------------------------------------------

def test_in_flight_twin_is_unjudged_within_bounds():
    p = lay(toks(10))
    src = req(1, p, 0, first=0.5, end=5)  # started before R's first token, done after R.start
    for cached in (0, 4, 8):
        j = one([src, req(2, p, 1, first=2, end=3, cached=cached)], 2)
        assert (j.lower, j.upper, j.verdict, j.expected) == (0, 8, "unjudged", None)
        assert (j.leaked_tokens, j.missing_tokens) == (0, 0)


def test_in_flight_twin_leak_above_upper():
    p = lay(toks(10))
    src = req(1, p, 0, first=0.5, end=5, salt="A")
    twin = req(2, p, 1, first=2, end=3, salt="A", cached=4)
    other = req(3, p, 1, first=2, end=3, salt="B", cached=4)
    got = judge([src, twin, other], B)
    assert got[2].verdict == "unjudged"
    assert (got[3].lower, got[3].upper, got[3].verdict, got[3].leaked_tokens) == (0, 0, "leak", 4)


def test_several_sources_bounds_differ_per_block():
    short, long = lay(toks(9)), lay(toks(13))  # 2 and 3 full blocks of the same chain
    done = req(1, short, 0, end=1)
    flying = req(2, long, 0.5, first=0.6, end=9)
    j = one([done, flying, req(3, lay(toks(17)), 2, first=3, end=4, cached=12)], 3)
    assert (j.lower, j.upper, j.verdict) == (8, 12, "unjudged")


def test_time_boundaries():
    p = lay(toks(10))
    at_start = req(1, p, 0, end=2)  # ends exactly when R starts: certainly cached
    assert one([at_start, req(2, p, 2, cached=8)], 2).expected == 8
    at_first = req(1, p, 2.1, end=9)  # starts exactly at R's first token: not allowed
    assert one([at_first, req(2, p, 2, cached=0)], 2).expected == 0


def test_source_started_after_first_token_does_not_count():
    p = lay(toks(10))
    j = one([req(1, p, 0, first=0.1, end=1, cached=0), req(2, p, 0.5, cached=0)], 1)
    assert (j.lower, j.upper, j.verdict) == (0, 0, "met")


def test_failed_source_counts_for_upper_only():
    p = lay(toks(10))
    failed = req(1, p, 0, cached=None)  # no first token: any later start may have fed it
    got = judge([failed, req(2, p, 2, cached=8)], B)
    assert got[1] == Judgement(0, 8, "failed", 0, 0)
    assert (got[2].lower, got[2].upper, got[2].verdict) == (0, 8, "unjudged")


def test_failed_request_keeps_its_bounds():
    p = lay(toks(10))
    got = judge([req(1, p, 0), req(2, p, 2, cached=None)], B)
    assert got[2] == Judgement(8, 8, "failed", 0, 0)


def test_failed_without_first_token_is_bounded_by_all_earlier_starts():
    p = lay(toks(10))
    got = judge([req(1, p, 0, end=50), req(2, p, 2, cached=None)], B)
    assert (got[2].lower, got[2].upper, got[2].verdict) == (0, 8, "failed")


def test_unknown_layout_is_not_judged_but_may_be_a_source():
    """A request whose layout is unknown may have cached any of the later same-salt
    requests' blocks (its length unknown too): their ``upper`` widens, never ``lower``."""
    p = lay(toks(10))
    got = judge([req(1, None, 0), req(2, p, 2), req(3, p, 5, cached=8)], B)
    assert got[1] == Judgement(0, 0, "no-layout", 0, 0)
    assert got[2] == Judgement(0, 8, "unjudged", 0, 0, unknown_tokens=8)
    assert got[3] == Judgement(8, 8, "met", 0, 0)  # request 2 guarantees its blocks
    assert judge([req(1, None, 0, cached=None)], B)[1].verdict == "failed"


def test_unknown_source_reaches_as_far_as_its_prompt_and_output():
    """Prompt 9 tokens + 4 output tokens: KV for 12 tokens, 3 full blocks at most."""
    unknown = Sent(1, "A", None, 0.0, 0.1, 1.0, 0, output_tokens=4, prompt_tokens=9)
    long = lay(toks(21))  # 5 blocks looked up
    assert one([unknown, req(2, long, 2, cached=12, salt="A")], 2) == Judgement(
        0, 12, "unjudged", 0, 0, unknown_tokens=12)
    assert one([unknown, req(2, long, 2, cached=16, salt="A")], 2).verdict == "leak"
    # Started after the request's first token: no source.
    assert one([unknown, req(2, long, -1, first=0.0, cached=0, salt="A")], 2).verdict == "met"


def test_unknown_source_never_widens_another_salt():
    """A cross-salt hit is a leak whatever the salt's own unknown requests did."""
    p = lay(toks(10))
    sent = [req(1, None, 0, salt="A"), req(2, p, 1, salt="A"), req(3, p, 3, cached=8, salt="B")]
    got = judge(sent, B)
    assert (got[3].upper, got[3].verdict, got[3].leaked_tokens) == (0, "leak", 8)
    assert got[2].verdict == "unjudged"


def test_reached_by_lets_an_unknown_domain_reach_others():
    """Behind a router, a request no replica claims may have been served by any."""
    p = lay(toks(10))
    sent = [Sent(1, ("A", None), None, 0, 0.1, 1, 0), Sent(2, ("A", "r0"), p, 2, 2.1, 3, 8)]
    assert judge(sent, B)[2].verdict == "leak"
    widened = judge(sent, B, lambda d: (d, (d[0], None)))[2]
    assert (widened.upper, widened.verdict) == (8, "unjudged")


def test_under_hit():
    p = lay(toks(10))
    j = one([req(1, p, 0), req(2, p, 2, cached=4)], 2)
    assert (j.verdict, j.lower, j.missing_tokens, j.leaked_tokens) == ("under-hit", 8, 4, 0)


def test_expected_property():
    assert Judgement(8, 8, "met", 0, 0).expected == 8
    assert Judgement(0, 8, "unjudged", 0, 0).expected is None


def test_request_is_not_its_own_source():
    p = lay(toks(10))
    j = one([req(1, p, 0, first=5, end=6, cached=8)], 1)
    assert (j.upper, j.verdict, j.leaked_tokens) == (0, "leak", 8)


# --- against a pairwise reference -----------------------------------------------------

def reference(sent: list[Sent], block_size: int) -> dict[int, tuple[int, int]]:
    """(lower, upper) by comparing every pair: leading runs of blocks held in time."""
    out = {}
    for r in sent:
        if r.layout is None:
            out[r.id] = (0, 0)
            continue
        cutoff = r.first_token if r.first_token is not None else r.end if r.end is not None else math.inf
        keys = r.layout.block_keys[:(r.layout.n_tokens - 1) // block_size]
        peers = [p for p in sent if p.id != r.id and p.layout is not None and p.salt == r.salt]
        # A same-salt request of unknown layout (and length) started before: any block.
        blind = any(p.layout is None and p.salt == r.salt and p.start < cutoff for p in sent)

        def held(i: int, ok, keys=keys, peers=peers) -> bool:
            return any(i < len(p.layout.block_keys) and p.layout.block_keys[i] == keys[i] and ok(p)
                       for p in peers)

        def done(p: Sent, start: float = r.start) -> bool:
            return p.end is not None and p.end <= start

        def began(p: Sent, cutoff: float = cutoff) -> bool:
            return p.start < cutoff

        lower = next((i for i in range(len(keys)) if not held(i, done)), len(keys))
        upper = len(keys) if blind else next((i for i in range(len(keys)) if not held(i, began)),
                                              len(keys))
        out[r.id] = (lower * block_size, upper * block_size)
    return out


def random_sequence(rng: random.Random, n: int) -> list[Sent]:
    prompts = [rng.choice([[1, 2, 3, 4], [1, 2, 3, 5], [7, 7, 7, 7]]) * rng.randint(1, 4)
               + toks(rng.randint(0, 6)) for _ in range(8)]
    out = []
    for rid in range(n):
        start = rng.uniform(0, 10)
        ok = rng.random() < 0.8
        first = start + rng.uniform(0.01, 2) if rng.random() < 0.9 else None
        end = (first or start) + rng.uniform(0.01, 2) if ok else None
        lay_ = lay(rng.choice(prompts), *([MediaSpan(2, 3, rng.choice("xy"))] if rng.random() < 0.3 else []))
        out.append(Sent(rid, rng.choice([None, "A", "B"]), lay_ if rng.random() < 0.95 else None,
                        start, first, end, rng.choice([0, 4, 8]) if ok else None))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_matches_pairwise_reference_and_order_independent(seed):
    rng = random.Random(seed)
    sent = random_sequence(rng, 40)
    got = judge(sent, B)
    assert {rid: (j.lower, j.upper) for rid, j in got.items()} == reference(sent, B)
    shuffled = sent[:]
    rng.shuffle(shuffled)
    assert judge(shuffled, B) == got


# --- scale ----------------------------------------------------------------------------

def test_judges_100k_requests_of_20_blocks():
    rng = random.Random(0)
    systems = [toks(32, 1000 * s) for s in range(4)]
    pool = [layout(rng.choice(systems) + toks(49, 10_000 + 100 * c), [MediaSpan(40, 8, f"img{c % 50}")], B)
            for c in range(300)]  # 81 tokens: 20 full blocks, 20 may hit
    salts = [None] + [f"salt{k}" for k in range(10)]
    sent = [Sent(i, rng.choice(salts), rng.choice(pool), i * 0.01, i * 0.01 + 0.005, i * 0.01 + 0.03, 0)
            for i in range(100_000)]
    t0 = time.perf_counter()
    got = judge(sent, B)
    print(f"judge of {len(sent)} requests: {time.perf_counter() - t0:.2f} s")
    assert len(got) == len(sent)
    assert {j.verdict for j in got.values()} <= {"met", "under-hit", "unjudged"}
    assert all(j.upper <= 80 for j in got.values())


# --- blocks filled by generated tokens ------------------------------------------------

def _with_output(s: Sent, output_tokens: int) -> Sent:
    return Sent(s.id, s.salt, s.layout, s.start, s.first_token, s.end, s.cached, output_tokens)


def test_blocks_a_source_output_filled_widen_upper_only():
    """Turn 1 of a chat: the source's 6 prompt tokens (1 full block) and 5 generated tokens
    fill block 1 (tokens 0..9 have KV); the follow-up may hit it if its tokens match."""
    source = _with_output(req(1, lay(toks(6)), 0.0, cached=0), 5)
    follow = lay(toks(6) + toks(10, 50))  # 16 tokens: 3 blocks looked up
    for cached, verdict in ((4, "unjudged"), (8, "unjudged"), (12, "leak")):
        j = one([source, req(2, follow, 2.0, cached=cached)], 2)
        assert (j.lower, j.upper, j.verdict) == (4, 8, verdict)
    short = _with_output(req(1, lay(toks(6)), 0.0, cached=0), 2)  # tokens 0..6: block 1 not full
    assert one([short, req(2, follow, 2.0, cached=4)], 2).upper == 4


def test_output_blocks_of_another_salt_never_widen_upper():
    source = _with_output(req(1, lay(toks(6)), 0.0, cached=0, salt="a"), 5)
    j = one([source, req(2, lay(toks(6) + toks(10, 50)), 2.0, cached=4, salt="b")], 2)
    assert (j.upper, j.verdict) == (0, "leak")
