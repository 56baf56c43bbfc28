"""Isolation verdicts on the real engine: isolated as it is, LEAK where saltbench's own
client is made to drop the salt (a test-only switch; vLLM itself is untouched)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.engine.target import Target
from bench.isolation.experiment import IsolationOptions, cells_of, run_isolation
from bench.verdicts.isolation import exit_code


def _run(target: Target, tmp_path: Path, **kw) -> dict:
    out = tmp_path / "isolation.json"
    result = asyncio.run(run_isolation(target, IsolationOptions(**kw), "test-iso-000000", out,
                                       {"target": target.metadata}))
    assert out.exists() and result["complete"]
    return result


@pytest.fixture(scope="module")
def normal(target: Target, tmp_path_factory) -> dict:
    return _run(target, tmp_path_factory.mktemp("iso"), samples=3)


def test_current_engine_is_isolated_everywhere(normal: dict) -> None:
    cells = {(c["path"], c["modality"]): c for c in normal["cells"]}
    assert set(cells) == set(cells_of(IsolationOptions()))
    assert {c["verdict"] for c in cells.values()} == {"ISOLATED"}, [
        (k, c["reason"]) for k, c in cells.items() if c["verdict"] != "ISOLATED"]
    assert exit_code(normal) == 0
    for c in cells.values():
        assert c["counters"]["agree"], c["counters"]
        assert [s["name"] for s in c["steps"] if "/first" not in s["name"]] == [
            "same-salt-repeat", "cross-salt", "unsalted-repeat", "salted-after-unsalted",
            "salted-then-unsalted", "cross-salt-same-media"]


def test_uuid_probe_reports_what_the_uuid_does(normal: dict) -> None:
    assert [p["path"] for p in normal["uuid_probe"]] == ["chat", "generate-parts"]
    for probe in normal["uuid_probe"]:
        assert all(step["ok"] for step in probe["steps"].values()), probe["steps"]
        # Salt isolation holds for the KV cache whatever the uuid does.
        assert probe["cross_salt_cached_tokens"] == 0
        assert (probe["verdict"], probe["leaked_tokens"]) == ("ISOLATED", 0)
        assert probe["finding"]


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
        if c["path"] == "generate-parts":
            assert c["verdict"] == "LEAK" and c["leaked_tokens"] > 0, c
        else:
            assert c["verdict"] == "ISOLATED", c
    assert exit_code(result) == 1
