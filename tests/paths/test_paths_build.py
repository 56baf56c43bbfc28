"""Request-path helpers that need no server: placeholders, tags, modality labels."""

from __future__ import annotations

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


def test_token_rules_on_vllm_shaped_chunks() -> None:
    from bench.paths.base import carries_tokens, is_token_event

    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    text = {"choices": [{"index": 0, "delta": {"content": "ab"}}]}
    generate = {"choices": [{"index": 0, "token_ids": [17, 4]}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 9}}
    assert [is_token_event(e) for e in (role, text, generate, usage)] == [1, 1, 1, 0]
    assert [carries_tokens(e) for e in (role, text, generate, usage)] == [False, True, True, False]


def test_missing_cached_tokens_reads_as_zero_only_where_the_server_omits_zeros() -> None:
    from bench.paths.base import usage_counts

    usage = {"prompt_tokens": 40, "completion_tokens": 4}
    assert usage_counts(usage)["cached_tokens"] is None
    assert usage_counts(usage, zero_cached_omitted=True)["cached_tokens"] == 0
    reported = {**usage, "prompt_tokens_details": {"cached_tokens": 32}}
    assert usage_counts(reported, zero_cached_omitted=True)["cached_tokens"] == 32
    assert usage_counts(None, zero_cached_omitted=True)["cached_tokens"] is None
