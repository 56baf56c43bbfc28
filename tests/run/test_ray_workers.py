"""``run --workers N --ray ADDRESS``: the senders are Ray actors on a local cluster of two
nodes (against the zero-work server: the subject is saltbench's runner). Every request is
accounted for, each record names its sender, the clocks are aligned; a lost node's share
is recorded failed and the run ends."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from cliproc import saltbench_process

from bench.measured.records import read_records
from bench.results import read_results
from bench.vocab import Failure
from bench.zerowork.process import ZeroWorkServer

RUN = ["run", "--spec", "clientbench-text", "--paths", "chat", "--warmup", "0",
       "--max-concurrency", "4", "--workers", "2"]


def test_senders_on_two_nodes_account_for_every_request(tmp_path: Path) -> None:
    from raycluster import local_cluster

    out = tmp_path / "run"
    with local_cluster(nodes=2, cpus=1) as (cluster, _), ZeroWorkServer(
            itl_ms=5.0, output_tokens=4) as server, saltbench_process(
            *RUN, "--salt-modes", "none", "--requests", "120", "--server-url", server.url,
            "--ray", cluster.address, "--out", str(out)) as proc:
        _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-4000:]
    measured = [r for r in read_records(out / "records.jsonl") if r["phase"] == "measure"]
    assert len(measured) == 120 and all(r["ok"] for r in measured)
    assert Counter(r["request_id"] for r in measured).most_common(1)[0][1] == 1
    nodes = Counter(r["sender"]["node"] for r in measured)
    assert len(nodes) == 2 and sorted(nodes.values()) == [60, 60]
    (p,) = read_results(out / "results.json")["passes"]
    assert [s["node"] for s in p["senders"]] == sorted(nodes, key=lambda n: [
        s["node"] for s in p["senders"]].index(n))
    for s in p["senders"]:  # on one machine the clocks are one: the offset is the noise
        assert abs(s["clock_offset_s"]) <= s["offset_uncertainty_s"] + 0.005
        assert "lost" not in s
    assert p["completed"] == 120 and p["counters_agree"] is True
    # on the driver's clock: every request starts after the pass began and ends after it
    assert all(0 <= r["start_s"] <= r["end_s"] for r in measured)


def test_a_lost_node_leaves_its_share_failed_and_the_run_ends(tmp_path: Path) -> None:
    from raycluster import local_cluster

    out = tmp_path / "run"
    with local_cluster(nodes=2, cpus=1) as (cluster, [worker]), ZeroWorkServer(
            itl_ms=50.0, output_tokens=8) as server, saltbench_process(
            *RUN, "--salt-modes", "none,salted", "--requests", "200", "--server-url",
            server.url, "--ray", cluster.address, "--out", str(out)) as proc:
        # each request takes 350 ms or more: 200 at 4 in flight last about 18 s
        killer = threading.Timer(8.0, cluster.remove_node, (worker,))
        killer.start()
        try:
            _, stderr = proc.communicate(timeout=600)
        finally:
            killer.cancel()
    assert proc.returncode != 0, stderr[-4000:]
    measured = [r for r in read_records(out / "records.jsonl") if r["phase"] == "measure"]
    first = [r for r in measured if r["pass"] == 0]
    assert sorted(r["request_id"] for r in first) == sorted({r["request_id"] for r in first})
    assert len(first) == 200, "every request of the pass accounted for"
    lost = [r for r in first if r["failure"] == Failure.LOST]
    assert len(lost) == 100 and all("lost" in r["error"] for r in lost)
    assert all(r["ok"] for r in first if r["failure"] != Failure.LOST)
    # the run stopped: the next pass is recorded unsent, here, by no sender
    rest = [r for r in measured if r["pass"] == 1]
    assert len(rest) == 200 and {r["failure"] for r in rest} == {Failure.NOT_SENT}
    assert not any("sender" in r for r in rest)
    results = read_results(out / "results.json")
    assert sum("lost" in s for s in results["passes"][0]["senders"]) == 1
    assert "lost" in results["stopped"]
