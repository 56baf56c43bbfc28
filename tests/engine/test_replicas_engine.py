"""Two tiny-model replicas behind vllm-router (round_robin), one set-up for the module:
per-replica counters sum to the totals and agree with what each replica served, every
request is attributed, isolation holds on both replicas and through the router, and a
salt dropped on one path is caught on the replica where it leaks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from bench.engine.open import open_target
from bench.engine.target import Target
from bench.isolation.experiment import IsolationOptions, run_isolation
from bench.measured.records import read_records
from bench.options import target_args
from bench.outputs import RECORDS_FILE, new_run_id
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.verdicts.boundary import boundary_rows, exit_code
from bench.verdicts.runs import problems
from bench.workload import open_workload

REPLICAS = {"r0", "r1"}


@pytest.fixture(scope="module")
def routed() -> Iterator[Target]:
    args = target_args(replicas=2, router="round_robin", model_preset="tiny",
                       start_timeout=900.0)
    with open_target(args) as target:
        yield target


def _run(target: Target, out: Path, opts: RunOptions, spec: str, requests: int) -> dict:
    return run_benchmark(target, open_workload(spec, requests=requests), opts, out,
                         new_run_id("replicas"), Console(stderr=True))


def _isolation(target: Target, out: Path, **kw) -> dict:
    opts = IsolationOptions(**{"paths": ["chat", "generate-parts"],
                               "modalities": ["text", "image"], "samples": 0,
                               "uuid_probe": False, "fail_on": ("kv-cache",), **kw})
    return asyncio.run(run_isolation(target, opts, "test-replicas-0000", out / "isolation.json",
                                     {"target": target.metadata}))


def test_the_target_lists_replicas_and_what_the_router_forwards(routed: Target) -> None:
    meta = routed.metadata
    assert [r.name for r in routed.replicas] == ["r0", "r1"]
    assert meta["router"]["policy"] == "round_robin" and meta["router"]["managed"]
    assert all(meta["router_forwards"].values()), meta["router_forwards"]
    assert not meta["routes_unavailable"]
    assert all(r["rss_mib"] > 0 for r in meta["replicas"])


def test_replica_counters_sum_to_the_totals_and_every_request_is_attributed(
        routed: Target, tmp_path: Path) -> None:
    results = _run(routed, tmp_path, RunOptions(paths=["chat", "generate-parts"], warmup=1),
                   "smoke", 8)
    assert not problems(results), problems(results)
    measured = [r for r in read_records(tmp_path / RECORDS_FILE) if r["phase"] == "measure"]
    assert {r["replica"] for r in measured} <= REPLICAS and len(measured) == 32
    for p in results["passes"]:
        each = p["replicas"]["counters"]
        assert set(each) == REPLICAS and p["replicas"]["attribution"] == "response-header"
        for key, total in p["counters"].items():
            assert total == sum(c.get(key, 0.0) for c in each.values()), key
        assert p["counters_agree"] is True
    for row in results["replicas"]["passes"]:
        assert row["unattributed"] == 0 and sum(row["requests"].values()) == 8
        assert all(c["agree"] for c in row["per_replica"].values()), row["per_replica"]
        if row["path"] == "chat":  # round robin alternates
            assert row["requests"] == {"r0": 4, "r1": 4}


def test_isolation_holds_on_both_replicas_and_through_the_router(
        routed: Target, tmp_path: Path) -> None:
    """The KV cache holds on each replica and through the router; the media caches do not:
    the uuid probe and the side channel ask every replica, and each replica's media cell
    is SUBSTITUTED (vLLM 0.32.0 keys its processor cache by the uuid alone)."""
    result = _isolation(routed, tmp_path, uuid_probe=True, samples=3,
                        fail_on=("kv-cache", "media-content"))
    cells = {(c["path"], c["modality"], c["replica"]): c for c in result["cells"]}
    assert set(cells) == {(p, m, r) for p in ("chat", "generate-parts")
                          for m in ("text", "image") for r in REPLICAS}
    assert {c["verdict"] for c in cells.values()} == {"ISOLATED"}, [
        (k, c["reason"]) for k, c in cells.items() if c["verdict"] != "ISOLATED"]
    assert all(c["counters"]["agree"] for c in cells.values())
    assert {c["verdict"] for c in result["routed"]} == {"ISOLATED"}, result["routed"]
    for cell in result["routed"]:
        assert set(cell["load"]) <= REPLICAS and cell["affinity"]["of"] == 4
    assert exit_code(result, fail_on=("kv-cache",)) == 0
    probed = {(u["path"], u["replica"]): u for u in result["uuid_probe"]}
    assert set(probed) == {(p, r) for p in ("chat", "generate-parts") for r in REPLICAS}
    assert {u["content"] for u in probed.values()} == {"SUBSTITUTED"}
    timed = {(s["path"], s["kind"], s["replica"]) for s in result["side_channel"]}
    assert len(timed) == 2 * 2 * len(REPLICAS) == len(result["side_channel"])
    media_rows = [r for r in boundary_rows(result) if r["modality"] == "image"]
    assert {(r["path"], r["replica"]) for r in media_rows} == set(probed)
    assert {r["media-content"] for r in media_rows} == {"SUBSTITUTED"}
    assert all(r["timing"] not in ("n/a", "NOT PROBED") for r in media_rows), media_rows
    assert exit_code(result) == 1


def test_a_dropped_salt_is_caught_on_the_replica_where_it_leaks(
        routed: Target, tmp_path: Path) -> None:
    result = _isolation(routed, tmp_path, drop_salt_on=("generate-parts",))
    for cell in result["cells"]:
        expected = "LEAK" if cell["path"] == "generate-parts" else "ISOLATED"
        assert cell["verdict"] == expected, (cell["replica"], cell["reason"])
    for cell in result["routed"]:
        if cell["path"] != "generate-parts":
            assert cell["verdict"] == "ISOLATED", cell["reason"]
            continue
        assert cell["verdict"] == "LEAK"
        leaks = [s for s in cell["steps"] if s.get("leak")]
        # B leaks only where A's prefix is: on the replica that served A's prime
        assert leaks and all(s["with_prime"] for s in leaks)
        assert all(f"on {s['replica']}" in cell["reason"] for s in leaks)
    assert exit_code(result) == 1

    run = _run(routed, tmp_path / "run", RunOptions(paths=["chat"], salt_modes=["salted"],
                                                    warmup=1, drop_salt_on=("chat",)),
               "mixed-tenants", 24)
    measured = [r for r in read_records(tmp_path / "run" / RECORDS_FILE)
                if r["phase"] == "measure"]
    per_replica = run["replicas"]["passes"][0]["per_replica"]
    assert run["judgements"]["counts"]["leak"] > 0
    assert sum(c["leaks"] for c in per_replica.values()) == run["judgements"]["counts"]["leak"]
    assert {p["replica"] for p in run["judgements"]["problems"]} <= REPLICAS
    assert all(r["replica"] in REPLICAS for r in measured)
