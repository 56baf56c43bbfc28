"""Runs that did not measure the same thing are refused, naming every differing field."""

from __future__ import annotations

import copy

import pytest

from bench.compare.comparability import check, differences
from bench.errors import BenchError

META = {
    "workload": {"spec": {"sha256": "aa"}, "seed": 0, "counts": {"requests": 24}},
    "target": {"model": "m", "block_size": 32, "vllm_version": "0.32.0",
               "flags": ["--port", "1234", "--enable-scale-out", "--block-size", "32"]},
    "machine": {"cpu": "AMD EPYC", "cpu_count": 2},
    "options": {"rate": None, "max_concurrency": 1, "paths": ["chat"]},
}


def _new(**changes: object) -> dict:
    meta = copy.deepcopy(META)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = meta
        for p in parents:
            node = node[p]
        node[leaf] = value
    return meta


def test_identical_runs_and_local_flags_do_not_differ() -> None:
    new = _new(target__flags=["--port", "9999", "--enable-scale-out", "--block-size", "32"])
    assert differences(META, new) == {}
    assert check(META, _new(options__paths=["chat", "generate-tokens"]), []) == {}


def test_every_difference_is_named_with_the_flag_that_allows_it() -> None:
    new = _new(workload__seed=1, target__vllm_version="0.31.0", target__block_size=64)
    with pytest.raises(BenchError) as err:
        check(META, new, [])
    text = str(err.value)
    for field in ("workload.seed", "target.vllm_version", "target.block_size"):
        assert field in text and f"--allow {field}" in text


def test_allowed_differences_are_returned_and_prefixes_allow_subfields() -> None:
    new = _new(target__vllm_version="0.31.0")
    assert check(META, new, ["target.vllm_version"]) == {
        "target.vllm_version": ("0.32.0", "0.31.0")}
    assert "target.vllm_version" in check(META, new, ["target"])
    with pytest.raises(BenchError, match="not a compared field"):
        check(META, new, ["target.colour"])


def test_a_flag_one_version_lacks_is_not_a_difference() -> None:
    old = _new(target__flags=["--port", "1", "--block-size", "32"],
               target__flags_dropped=["--enable-scale-out"])
    assert "target.flags" not in differences(META, old)
    chosen = _new(target__flags=["--port", "1", "--block-size", "64"])
    assert "target.flags" in differences(META, chosen)
