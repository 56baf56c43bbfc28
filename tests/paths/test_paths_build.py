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
