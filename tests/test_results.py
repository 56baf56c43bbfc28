"""Results assembly from records (no server)."""

from __future__ import annotations

from bench.results import hit_miss_ttft


def test_hit_and_miss_ttft_split_on_cached_tokens() -> None:
    recs = [{"ok": True, "cached_tokens": 64, "ttft_ms": 10.0},
            {"ok": True, "cached_tokens": 64, "ttft_ms": 20.0},
            {"ok": True, "cached_tokens": 0, "ttft_ms": 100.0},
            {"ok": False, "cached_tokens": None, "ttft_ms": None}]
    out = hit_miss_ttft(recs)
    assert (out["hit_count"], out["miss_count"]) == (2, 1)
    assert out["p50_ttft_hit_ms"] == 15.0 and out["p50_ttft_miss_ms"] == 100.0
    assert hit_miss_ttft([])["p99_ttft_hit_ms"] is None
