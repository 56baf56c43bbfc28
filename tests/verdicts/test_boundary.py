"""The tenant boundary's verdicts, policy and exit codes (no engine), and what a timing guess
is worth, checked on simulated pairs of known effect."""

from __future__ import annotations

import numpy as np
import pytest

from bench.errors import BenchError
from bench.report.findings import isolation_findings
from bench.stats import guess_accuracy, majority_accuracy
from bench.verdicts.boundary import (
    boundary_rows,
    exit_code,
    parse_fail_on,
    per_cell,
    timing_verdict,
)
from bench.verdicts.isolation import CONTROL_STEP, CROSS_SALT, SAME_SALT, X_STEP, content_verdict
from bench.vocab import CONTENT, DEFAULT_FAIL_ON, KV, TIMING


def steps(x: int = 144, cross: int | str = 256, control: int = 256,
          hits: float | None = 0.0) -> dict[str, dict]:
    """Probe steps by prompt size (a string: that step failed); ``hits``: the cross
    step's multimodal-cache hits (None: the server has no such counter)."""
    def step(tokens: int | str, mm: float | None = 0.0) -> dict:
        if isinstance(tokens, str):
            return {"ok": False, "error": tokens, "prompt_tokens": None, "mm_cache_hits": None}
        return {"ok": True, "error": None, "prompt_tokens": tokens, "mm_cache_hits": mm}

    return {X_STEP: step(x), CROSS_SALT: step(cross, hits), SAME_SALT: step(control),
            CONTROL_STEP: step(control)}


def test_content_verdicts() -> None:
    assert content_verdict(steps()) == ("ISOLATED", [], None)
    # The other item's size, or a multimodal-cache hit: either is a substitution.
    verdict, evidence, reason = content_verdict(steps(cross=144))
    assert verdict == "SUBSTITUTED" and "the other item's size (its own: 256)" in evidence[0]
    assert reason.startswith(f"{CROSS_SALT}: a prompt of 144 tokens")
    assert content_verdict(steps(hits=1.0))[:2] == ("SUBSTITUTED", ["1 multimodal-cache hit(s)"])
    assert len(content_verdict(steps(cross=144, hits=2.0))[1]) == 2
    # Fail closed: no way to see a substitution is no verdict of isolation.
    assert content_verdict(steps(cross="timeout")) == ("ERROR", [], f"{CROSS_SALT}: timeout")
    cannot = content_verdict(steps(x=256, hits=None))
    assert cannot[0] == "ERROR" and "cannot tell" in cannot[2]
    assert content_verdict(steps(x=256))[0] == "ISOLATED"  # counters alone can see it
    assert content_verdict(steps(hits=None))[0] == "ISOLATED"  # sizes alone can see it


def test_timing_verdicts() -> None:
    assert timing_verdict({"finding": "distinguishable"}, True) == "EXPOSED"
    assert timing_verdict({"finding": "no evidence", "min_detectable_auc": 0.7}, True) == (
        "NOT DETECTED")
    assert timing_verdict({"finding": "no evidence", "min_detectable_auc": 0.9}, True) == (
        "UNDERPOWERED")
    assert timing_verdict({"finding": "no evidence", "min_detectable_auc": None}, True) == (
        "UNDERPOWERED")  # no AUC at all could have reached alpha
    assert timing_verdict({"finding": "too few samples"}, True) == "ERROR"
    assert timing_verdict(None, True) == "NOT PROBED"
    assert timing_verdict(None, False) == "n/a"


def test_policy_parsing() -> None:
    assert parse_fail_on("media-content,kv-cache") == ("kv-cache", "media-content")
    assert parse_fail_on("none") == () and parse_fail_on([]) == ()
    assert DEFAULT_FAIL_ON == (KV, CONTENT)
    with pytest.raises(BenchError, match="unknown channel.*kv.*choose from kv-cache"):
        parse_fail_on("kv")


def doc(content: str = "ISOLATED", timing: dict | None = None, kv: str = "ISOLATED",
        fail_on: tuple[str, ...] | None = None, uuid: bool = True) -> dict:
    """One image cell on chat with its uuid probe and cross-tenant timing row."""
    options = {"uuid_paths": ["chat"], **({"fail_on": list(fail_on)} if fail_on is not None
                                           else {})}
    return {"metadata": {"isolation_options": options},
            "cells": [{"path": "chat", "modality": "text", "verdict": "ISOLATED"},
                      {"path": "chat", "modality": "image", "verdict": kv, "leaked_tokens": 0}],
            "uuid_probe": [{"path": "chat", "modality": "image", "verdict": "ISOLATED",
                            "leaked_tokens": 0, "content": content}] if uuid else [],
            "side_channel": [{"path": "chat", "modality": "image", "kind": "cross-tenant-media",
                              **(timing or {"finding": "no evidence",
                                            "min_detectable_auc": 0.7})}]}


def test_boundary_rows() -> None:
    text, image = boundary_rows(doc("SUBSTITUTED", {"finding": "distinguishable", "auc": 1.0}))
    assert (text[KV], text[CONTENT], text[TIMING]) == ("ISOLATED", "n/a", "n/a")
    assert (image[KV], image[CONTENT], image[TIMING]) == ("ISOLATED", "SUBSTITUTED", "EXPOSED")
    assert image["auc"] == 1.0
    _, unprobed = boundary_rows(doc(uuid=False))
    assert unprobed[CONTENT] == "NOT PROBED"  # a uuid path whose probe was skipped


def behind_router(second: dict) -> dict:
    """:func:`doc` on replica r0, and ``second`` (a doc) as replica r1's entries."""
    out = doc()
    for key in ("cells", "uuid_probe", "side_channel"):
        out[key] = [{**e, "replica": "r0"} for e in out[key]] + [
            {**e, "replica": "r1"} for e in second[key]]
    return out


def test_every_replica_is_judged_on_every_channel() -> None:
    """Behind a router, each replica's uuid probe and timing row judge that replica's cell
    (a finding on one replica is not hidden by the other), and a cell's rows fold into one
    for the headline and heatmap, naming the replica."""
    both = behind_router(doc("SUBSTITUTED", {"finding": "distinguishable", "auc": 0.9}))
    rows = {(r["path"], r["modality"], r["replica"]): r for r in boundary_rows(both)}
    assert len(rows) == 4
    assert (rows["chat", "image", "r0"][CONTENT], rows["chat", "image", "r0"][TIMING]) == (
        "ISOLATED", "NOT DETECTED")
    r1 = rows["chat", "image", "r1"]
    assert (r1[CONTENT], r1[TIMING], r1["auc"]) == ("SUBSTITUTED", "EXPOSED", 0.9)
    assert exit_code(both) == 1
    text, image = per_cell(boundary_rows(both))
    assert (image[CONTENT], image[TIMING], image["auc"]) == ("SUBSTITUTED", "EXPOSED", 0.9)
    assert image["found_on"] == {KV: [], CONTENT: ["r1"], TIMING: ["r1"]}
    assert text[CONTENT] == "n/a"
    findings = isolation_findings(both)
    assert any(f.startswith("FAILS: Media content") and "chat (image on r1)" in f
               for f in findings), findings
    # A replica whose probe did not run is not judged isolated.
    unprobed = behind_router(doc(uuid=False))
    assert {r[CONTENT] for r in boundary_rows(unprobed) if r["modality"] == "image"} == {
        "ISOLATED", "NOT PROBED"}
    assert exit_code(unprobed) == 2


def test_exit_code_follows_the_policy() -> None:
    exposed = {"finding": "distinguishable", "auc": 1.0}
    weak = {"finding": "no evidence", "min_detectable_auc": 0.95}
    assert exit_code(doc()) == 0
    assert exit_code(doc("SUBSTITUTED")) == 1  # the default fails on content
    assert exit_code(doc("SUBSTITUTED", fail_on=("kv-cache",))) == 0  # recorded policy
    assert exit_code(doc("SUBSTITUTED"), fail_on=()) == 0  # given policy wins
    assert exit_code(doc(timing=exposed)) == 0  # timing is reported by default
    assert exit_code(doc(timing=exposed), fail_on=(TIMING,)) == 1
    assert exit_code(doc(timing=weak), fail_on=(TIMING,)) == 2  # unsure: fail closed
    assert exit_code(doc(uuid=False)) == 2  # content gated but not probed
    assert exit_code(doc(uuid=False), fail_on=(KV,)) == 0
    assert exit_code(doc("ERROR", kv="LEAK")) == 1  # a finding outranks an unjudged channel
    assert exit_code(doc("ERROR")) == 2


@pytest.mark.parametrize("k", [1, 2, 3, 9])
def test_majority_accuracy_matches_simulation(k: int) -> None:
    rng = np.random.default_rng(k)
    votes = rng.random((200_000, k)) < 0.7
    right = votes.sum(axis=1)
    simulated = np.mean((right > k / 2) + 0.5 * (right == k / 2))
    assert majority_accuracy(0.7, k) == pytest.approx(simulated, abs=0.005)
    assert majority_accuracy(0.5, k) == pytest.approx(0.5)


@pytest.mark.parametrize("p", [0.6, 0.9])
def test_guess_interval_covers_the_true_accuracy(p: float) -> None:
    """On pairs whose true one-pair accuracy is ``p``: the 95% interval of the 1-pair and
    5-pair accuracy covers the truth about 95% of the time (at 22 pairs, as measured)."""
    rng = np.random.default_rng(int(p * 100))
    covered = {1: 0, 5: 0}
    runs = 400
    for _ in range(runs):
        slower = rng.random(22) < p
        slow = np.where(slower, 2.0, 1.0)
        fast = np.where(slower, 1.0, 2.0)
        guess = guess_accuracy(slow, fast)
        for k in covered:
            _, low, high = guess["accuracy"][str(k)]
            covered[k] += low <= majority_accuracy(p, k) <= high
    for k, hits in covered.items():
        assert 0.91 <= hits / runs <= 0.995, (p, k, hits / runs)


def test_guess_from_perfect_separation_needs_few_pairs() -> None:
    guess = guess_accuracy([2.0] * 22, [1.0] * 22)
    assert guess["p_pair"] == 1.0 and guess["accuracy"]["1"][1] > 0.8
    assert guess["probes_for_target"] == 5  # the Wilson low end at 22/22 is 0.85
    assert guess_accuracy([], [])["probes_for_target"] is None
