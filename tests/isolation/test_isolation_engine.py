"""Isolation verdicts on the real engine: isolated as it is, LEAK where saltbench's own
client is made to drop the salt (a test-only switch; vLLM itself is untouched)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.engine.target import Target
from bench.isolation.experiment import IsolationOptions, cells_of, run_isolation
from bench.report.findings import isolation_findings
from bench.verdicts.boundary import boundary_rows, exit_code
from bench.verdicts.requests import full_hit_tokens


def _run(target: Target, tmp_path: Path, **kw) -> dict:
    out = tmp_path / "isolation.json"
    result = asyncio.run(run_isolation(target, IsolationOptions(**kw), "test-iso-000000", out,
                                       {"target": target.metadata}))
    assert out.exists() and result["complete"]
    return result


@pytest.fixture(scope="module")
def normal(target: Target, tmp_path_factory) -> dict:
    return _run(target, tmp_path_factory.mktemp("iso"), samples=3)


STEP_NAMES = ["same-salt-repeat", "cross-salt", "unsalted-repeat", "salted-after-unsalted",
              "salted-then-unsalted", "cross-salt-same-media"]


def test_current_engine_is_isolated_everywhere(normal: dict, target: Target) -> None:
    """One request at a time on one server: every step gets exactly what the cache should
    give (a full hit, whole blocks of the first n-1 tokens, or 0), and the counters count
    every request once."""
    cells = {(c["path"], c["modality"]): c for c in normal["cells"]}
    assert set(cells) == set(cells_of(IsolationOptions()))
    assert {c["verdict"] for c in cells.values()} == {"ISOLATED"}, [
        (k, c["reason"]) for k, c in cells.items() if c["verdict"] != "ISOLATED"]
    assert exit_code(normal, fail_on=("kv-cache",)) == 0
    for key, c in cells.items():
        steps = {s["name"]: s for s in c["steps"]}
        assert list(steps) == [n for name in STEP_NAMES for n in (f"{name}/first", name)]
        for name in STEP_NAMES:
            first, second = steps[f"{name}/first"], steps[name]
            assert first["cached"] == 0 and first["ok"], (key, first)
            assert second["prompt_tokens"] == first["prompt_tokens"], (key, name)
            full = full_hit_tokens(second["prompt_tokens"], target.block_size)
            assert full > 0, (key, second)  # the probe spans a block: a hit is visible
            assert second["cached"] == (full if second["rule"] == "full" else 0), (key, second)
            assert second["expected"] == (full if second["rule"] == "full" else 0)
        counters = c["counters"]
        assert counters["agree"] is True and counters["exact"] is True, (key, counters)
        assert counters["prefix_cache_hits"] == counters["cached_tokens"] == sum(
            s["expected"] for s in c["steps"])
        assert counters["prefix_cache_queries"] == counters["prompt_tokens"] == sum(
            s["prompt_tokens"] for s in c["steps"])


def test_uuid_probe_reports_what_the_uuid_does(normal: dict, target: Target) -> None:
    assert [(p["path"], p["modality"]) for p in normal["uuid_probe"]] == [
        (path, m) for path in ("chat", "generate-parts") for m in ("image", "audio", "video")]
    for probe in normal["uuid_probe"]:
        steps = probe["steps"]
        assert all(step["ok"] for step in steps.values()), steps
        assert steps["x-salt-a"]["cached_tokens"] == 0
        # Salt isolation holds for the KV cache whatever the uuid does.
        assert probe["cross_salt_cached_tokens"] == 0
        assert (probe["verdict"], probe["leaked_tokens"], probe["reason"]) == ("ISOLATED", 0, None)
        # Under the same salt, the uuid replaces the content hash: a different item gets
        # the full hit.
        same = steps["y-salt-a-same-uuid"]
        assert same["cached_tokens"] == full_hit_tokens(same["prompt_tokens"], target.block_size)
        assert probe["finding"].startswith("another salt: 0 cached tokens (KV isolated by salt)")
        assert (f"same salt: a DIFFERENT {probe['modality']} with the same uuid got the full KV "
                "hit") in probe["finding"]


def test_media_content_is_substituted_across_salts(normal: dict) -> None:
    """vLLM 0.32.0 keys its multimodal processor cache by the client uuid, not the salt:
    another tenant's item of another size answers for mine, seen two ways (a cache hit,
    and my prompt taking the other item's size); the default policy fails the run."""
    for probe in normal["uuid_probe"]:
        steps = probe["steps"]
        x, cross, own = (steps[k] for k in ("x-salt-a", "y-salt-b-same-uuid",
                                             "y-salt-a-no-uuid"))
        assert x["prompt_tokens"] != own["prompt_tokens"], probe  # the sizes tell them apart
        assert cross["prompt_tokens"] == x["prompt_tokens"], probe
        assert cross["mm_cache_hits"] >= 1, probe
        assert probe["content"] == "SUBSTITUTED" and len(probe["content_evidence"]) == 2
    rows = {(r["path"], r["modality"]): r for r in boundary_rows(normal)}
    assert {r["media-content"] for k, r in rows.items() if k[0] == "generate-features"} == {"n/a"}
    assert exit_code(normal) == 1 and normal["exit_code"] == 1
    headline = [f for f in isolation_findings(normal) if "Media content" in f]
    assert headline and headline[0].startswith("FAILS: Media content:")


def test_per_tenant_uuids_close_the_media_content_channel(target: Target,
                                                           tmp_path: Path) -> None:
    """The mitigation on the client side: every uuid namespaced by its tenant. The item of
    the other size is then processed as its own under another salt (no cache hit, its own
    prompt size) and the default policy passes the run."""
    result = _run(target, tmp_path, paths=["chat", "generate-parts"], modalities=["image"],
                  samples=0, client_uuids="per-tenant")
    assert len(result["uuid_probe"]) == 2
    for probe in result["uuid_probe"]:
        steps = probe["steps"]
        cross, own = steps["y-salt-b-same-uuid"], steps["y-salt-a-no-uuid"]
        assert cross["ok"] and cross["prompt_tokens"] == own["prompt_tokens"], probe
        assert cross["mm_cache_hits"] == 0, probe
        assert (probe["content"], probe["verdict"]) == ("ISOLATED", "ISOLATED"), probe
    assert {r["media-content"] for r in boundary_rows(result)
            if r["modality"] == "image"} == {"ISOLATED"}
    assert exit_code(result) == 0 == result["exit_code"]


def test_side_channel_rows_for_every_media_cell(normal: dict) -> None:
    rows = {(s["path"], s["modality"], s["kind"]) for s in normal["side_channel"]}
    assert len(rows) == 3 * 3 * 2
    for s in normal["side_channel"]:
        assert s["n_a"] == s["n_b"] == 3
        assert 0.0 <= s["ci_low"] <= s["auc"] <= s["ci_high"] <= 1.0
        assert 0.0 < s["p_value"] <= s["p_adjusted"] <= 1.0
        assert s["finding"] in ("distinguishable", "no evidence")
        assert "distinguishable" not in s


def test_dropped_salt_on_content_parts_is_a_leak(target: Target, tmp_path: Path) -> None:
    result = _run(target, tmp_path, modalities=["text", "image"], samples=0, uuid_probe=False,
                  drop_salt_on=("generate-parts",))
    for c in result["cells"]:
        if c["path"] != "generate-parts":
            assert c["verdict"] == "ISOLATED", c
            continue
        # The salt dropped: each salted step after the same prompt gets the full hit, the
        # one whose text diverges after the media the blocks before the divergence.
        leaks = [s for s in c["steps"] if s["rule"] == "none" and s["cached"]]
        assert [s["name"] for s in leaks] == ["cross-salt", "salted-after-unsalted",
                                              "salted-then-unsalted", "cross-salt-same-media"]
        full = [full_hit_tokens(s["prompt_tokens"], target.block_size) for s in leaks]
        assert [s["cached"] for s in leaks[:3]] == full[:3], c["steps"]
        assert 0 < leaks[3]["cached"] <= full[3]
        assert (c["verdict"], c["leaked_tokens"]) == ("LEAK", sum(s["cached"] for s in leaks))
    assert exit_code(result) == 1 and exit_code(result, fail_on=("kv-cache",)) == 1
