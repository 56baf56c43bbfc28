"""``compare`` on real runs of the tiny model (tests/fixtures/compare, made by
make_compare_fixtures.py): pure noise, a real slow-down, an isolation loss, runs that
cannot be compared, and bad input, each with its states and exit code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.cli import main
from bench.compare.dashboard import BIGGER, SMALLER
from bench.outputs import COMPARE_FILE, COMPARE_KIND, COMPARE_MD, RESULTS_FILE
from bench.registry import METRICS
from bench.vocab import ISOLATED, LEAK, NO_CHANGE, REGRESSED

FIXTURES = Path(__file__).parents[1] / "fixtures" / "compare"


def _compare(tmp_path: Path, base: str | Path, new: str | Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "cmp"
    code = main(["compare", str(FIXTURES / base), str(FIXTURES / new), "--out", str(out), *extra])
    doc = json.loads((out / COMPARE_FILE).read_text()) if (out / COMPARE_FILE).exists() else {}
    return code, doc


def _states(doc: dict, **match: str) -> dict[str, str]:
    return {r["metric"]: r["state"] for r in doc["rows"]
            if all(r[k] == v for k, v in match.items())}


def test_the_same_build_twice_passes(tmp_path: Path) -> None:
    code, doc = _compare(tmp_path, "base", "same")
    assert code == 0 and doc["kind"] == COMPARE_KIND
    assert doc["summary"]["gate failures"] == 0
    assert all(r["state"] == NO_CHANGE for r in doc["isolation"])
    assert {r["metric"] for r in doc["rows"]} >= {"p99_ttft_ms", "hit_rate", "leaked_tokens"}


def test_a_slower_machine_is_a_regression(tmp_path: Path) -> None:
    code, doc = _compare(tmp_path, "base", "slow")
    assert code == 1
    regressed = [r for r in doc["rows"] if r["state"] == REGRESSED]
    assert {r["path"] for r in regressed} == {"chat", "generate-parts"}
    for r in regressed:  # the interval excludes no change, in the bad direction
        metric = METRICS[r["metric"]]
        assert r["gated"] and metric.worse(r["low"]) > 0 and metric.worse(r["high"]) > 0
    assert "mean_ttft_ms" in {r["metric"] for r in regressed}
    assert all(r["state"] != REGRESSED for r in doc["rows"] if r["metric"] == "hit_rate")


def test_thresholds_decide_what_a_regression_is(tmp_path: Path) -> None:
    gate = tmp_path / "gate.toml"
    names = ["mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms",
             "mean_itl_ms", "mean_e2el_ms", "p99_e2el_ms", "request_throughput",
             "output_throughput"]
    gate.write_text("[metrics]\n" + "".join(f'{n} = "off"\n' for n in names))
    code, doc = _compare(tmp_path, "base", "slow", "--thresholds", str(gate))
    assert code == 0
    assert any(r["state"] == REGRESSED and not r["gated"] for r in doc["rows"])


def test_a_dropped_salt_loses_isolation_and_fails(tmp_path: Path) -> None:
    code, doc = _compare(tmp_path, "base", "leak")
    assert code == 1
    lost = {(r["path"], r["modality"]) for r in doc["isolation"] if r["state"] == REGRESSED}
    assert lost == {("generate-parts", m) for m in ("text", "image", "audio", "video")}
    assert {r["new"] for r in doc["isolation"] if r["path"] == "chat"} == {ISOLATED}
    assert {r["new"] for r in doc["isolation"] if r["path"] == "generate-parts"} == {LEAK}
    leaks = {(r["path"], r["salt_mode"]) for r in doc["rows"]
             if r["metric"] == "leaked_tokens" and r["state"] == REGRESSED}
    assert ("generate-parts", "salted") in leaks and ("chat", "salted") not in leaks


def test_isolation_report_only_does_not_fail_the_gate(tmp_path: Path) -> None:
    gate = tmp_path / "gate.toml"
    gate.write_text('isolation = "report"\n[metrics]\nleaked_tokens = "off"\n')
    code, doc = _compare(tmp_path, "base", "leak", "--thresholds", str(gate))
    assert doc["summary"]["isolation lost"] == 4
    assert all(not r["gated"] for r in doc["isolation"])
    assert code == (1 if doc["summary"]["gate failures"] else 0)


def _edited(tmp_path: Path, **target: object) -> Path:
    copy = tmp_path / "edited"
    shutil.copytree(FIXTURES / "same", copy)
    results = json.loads((copy / RESULTS_FILE).read_text())
    results["metadata"]["target"].update(target)
    (copy / RESULTS_FILE).write_text(json.dumps(results))
    return copy


def test_incomparable_runs_are_refused_naming_the_fields(tmp_path: Path, capsys) -> None:
    new = _edited(tmp_path, block_size=64, vllm_version="0.31.0")
    code, _ = _compare(tmp_path, "base", new)
    err = capsys.readouterr().err
    assert code == 2
    assert "target.block_size" in err and "target.vllm_version" in err
    code, doc = _compare(tmp_path, "base", new, "--allow", "target.block_size",
                         "--allow", "target.vllm_version")
    assert code == 0 and set(doc["allowed_differences"]) == {"target.block_size",
                                                            "target.vllm_version"}


def test_bad_input_is_exit_2_naming_it(tmp_path: Path, capsys) -> None:
    assert _compare(tmp_path, "base", tmp_path)[0] == 2
    assert str(tmp_path) in capsys.readouterr().err
    gate = tmp_path / "gate.toml"
    gate.write_text('[metrics]\np99_ttft_ms = "-10%"\n')
    assert _compare(tmp_path, "base", "same", "--thresholds", str(gate))[0] == 2
    assert "lower-is-better" in capsys.readouterr().err


def test_outputs_for_people_and_dashboards(tmp_path: Path) -> None:
    _compare(tmp_path, "base", "slow")
    out = tmp_path / "cmp"
    assert (out / COMPARE_MD).read_text().startswith("## saltbench compare")
    assert "FAIL" in (out / COMPARE_MD).read_text()
    assert (out / "compare.html").exists()
    for kind in (SMALLER, BIGGER):
        entries = json.loads((out / f"dashboard-{kind}.json").read_text())
        assert entries and all({"name", "unit", "value"} <= set(e) for e in entries)
    names = [e["name"] for e in json.loads((out / f"dashboard-{BIGGER}.json").read_text())]
    assert any(n.startswith("hit_rate ") for n in names)
    assert not any(n.startswith("p99_ttft_ms") for n in names)
