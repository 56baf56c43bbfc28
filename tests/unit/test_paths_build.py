"""Request-path helpers that need no server: placeholders, tags, expectations."""

from __future__ import annotations

from bench.expectations import PrefixTracker, expected_cached, full_hit_tokens
from bench.paths.base import modality_label, tagged
from bench.paths.generate import collapse_placeholders


def test_collapse_placeholders_keeps_one_token_per_item() -> None:
    ids = [1, 2, 9, 9, 9, 3, 8, 8, 4]
    placeholders = {"image": [{"offset": 2, "length": 3}], "audio": [{"offset": 6, "length": 2}]}
    assert collapse_placeholders(ids, placeholders) == [1, 2, 9, 3, 8, 4]
    assert collapse_placeholders(ids, {}) == ids


def test_tag_goes_before_the_first_text() -> None:
    req = {"messages": [{"role": "system", "content": [{"type": "image", "media": "i"},
                                                        {"type": "text", "text": "[c1] hi"}]}]}
    out = tagged(req, "ab12")
    assert out[0]["content"][1]["text"] == "[ab12] [c1] hi"
    assert req["messages"][0]["content"][1]["text"] == "[c1] hi"  # input untouched


def test_modality_label() -> None:
    assert modality_label([]) == "text"
    assert modality_label(["image", "image"]) == "image"
    assert modality_label(["image", "audio"]) == "mixed"


def test_full_hit_is_whole_blocks_of_n_minus_one() -> None:
    assert full_hit_tokens(99, 32) == 96
    assert full_hit_tokens(97, 32) == 96
    assert full_hit_tokens(96, 32) == 64
    assert full_hit_tokens(1, 32) == 0


def test_tracker_judges_by_salt_case_and_completion() -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "[c1] a"}]}]
    longer = [*msgs, {"role": "user", "content": [{"type": "text", "text": "b"}]}]
    t = PrefixTracker()
    expect, key = t.start("A", msgs)
    assert expect == "none"
    assert t.start("A", msgs)[0] == "unjudged"   # twin still in flight
    t.complete(key)
    assert t.start("A", msgs)[0] == "full"
    assert t.start("B", msgs)[0] == "none"       # another salt shares nothing
    assert t.start(None, msgs)[0] == "none"
    assert t.start("A", longer)[0] == "unjudged"  # a shared prefix: not judged
    assert expected_cached("full", 99, 32) == 96
    assert expected_cached("none", 99, 32) == 0
    assert expected_cached("unjudged", 99, 32) is None


def test_run_problems_fail_a_ci_step() -> None:
    from bench.results import problems

    clean = {"passes": [{"failed": 0}], "expectations": {"unmet": []}, "interrupted": False}
    assert problems(clean) == []
    bad = {"passes": [{"failed": 2}, {"failed": 1}], "expectations": {"unmet": [{}]},
           "interrupted": True}
    assert problems(bad) == ["3 measured request(s) failed",
                             "1 request(s) missed their cache expectation",
                             "the run was interrupted"]


def test_hit_and_miss_ttft_split_on_cached_tokens() -> None:
    from bench.results import hit_miss_ttft

    recs = [{"ok": True, "cached_tokens": 64, "ttft_ms": 10.0},
            {"ok": True, "cached_tokens": 64, "ttft_ms": 20.0},
            {"ok": True, "cached_tokens": 0, "ttft_ms": 100.0},
            {"ok": False, "cached_tokens": None, "ttft_ms": None}]
    out = hit_miss_ttft(recs)
    assert (out["hit_count"], out["miss_count"]) == (2, 1)
    assert out["p50_ttft_hit_ms"] == 15.0 and out["p50_ttft_miss_ms"] == 100.0
    assert hit_miss_ttft([])["p99_ttft_hit_ms"] is None
