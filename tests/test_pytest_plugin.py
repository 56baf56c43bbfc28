"""The pytest plugin without the engine: the gate's comparison on hand-made extra_info, and
inner pytest sessions (pytester) against the fake server.

The fake server says nothing about vLLM; it only lets the fixture, pytest-benchmark's
storage and the gate go through their motions. tests/test_pytest_plugin_engine.py runs
the plugin on the real engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.compare.thresholds import load_thresholds
from bench.pytest_plugin import (
    DIRECTIONS_KEY,
    GROUPS_KEY,
    change_of,
    compare_extra_info,
    evaluate_gate,
    format_table,
    summary_lines,
)
from bench.registry import METRICS

pytest_plugins = ["pytester"]

DEFAULTS = {m.name: m.threshold for m in METRICS.values()}
BASE = {"mean_ttft_ms": 100.0, "p99_ttft_ms": 200.0, "request_throughput": 10.0,
        "output_throughput": 40.0, "hit_rate": 0.50, "leaked_tokens": 0}


def _failed(rows) -> dict[str, bool]:
    return {r.metric: r.failed for r in rows}


def test_change_is_relative_or_in_points() -> None:
    assert change_of("mean_ttft_ms", 100.0, 110.0) == pytest.approx(0.10)
    assert change_of("request_throughput", 10.0, 8.0) == pytest.approx(-0.20)
    assert change_of("hit_rate", 0.50, 0.47) == pytest.approx(-3.0)  # percentage points
    assert change_of("mean_ttft_ms", 0.0, 0.0) == 0.0
    assert change_of("mean_ttft_ms", 0.0, 1.0) == float("inf")


def test_lower_is_better_fails_on_a_rise_beyond_the_threshold() -> None:
    mean, p99 = DEFAULTS["mean_ttft_ms"], DEFAULTS["p99_ttft_ms"]
    rows = compare_extra_info("t", {**BASE, "mean_ttft_ms": 100.0 * (1 + mean + 0.01),
                                    "p99_ttft_ms": 200.0 * (1 + p99 - 0.05)}, BASE, DEFAULTS)
    failed = _failed(rows)
    assert failed["mean_ttft_ms"] and not failed["p99_ttft_ms"]  # just beyond; just within
    row = next(r for r in rows if r.metric == "mean_ttft_ms")
    assert row.base == 100.0 and row.change == f"{mean + 0.01:+.1%}"
    assert row.threshold == f"+{mean * 100:g}%"
    improved = compare_extra_info("t", {**BASE, "mean_ttft_ms": 10.0}, BASE, DEFAULTS)
    assert not any(r.failed for r in improved)


def test_higher_is_better_fails_on_a_drop_beyond_the_threshold() -> None:
    drop = DEFAULTS["request_throughput"] + 0.01
    new = {**BASE, "request_throughput": 10.0 * (1 - drop), "output_throughput": 90.0,
           "hit_rate": 0.47}
    failed = _failed(compare_extra_info("t", new, BASE, DEFAULTS))
    assert failed["request_throughput"]  # just beyond the threshold
    assert not failed["output_throughput"]  # a rise is better
    assert failed["hit_rate"]  # -3pp beyond -2pp
    assert not _failed(compare_extra_info("t", {**BASE, "hit_rate": 0.49}, BASE,
                                          DEFAULTS))["hit_rate"]


def test_leaked_tokens_must_be_zero_with_or_without_a_baseline() -> None:
    rows = compare_extra_info("t", {**BASE, "leaked_tokens": 32}, None, DEFAULTS)
    assert [(r.metric, r.failed, r.threshold) for r in rows] == [
        ("leaked_tokens", True, "must be 0")]
    assert not compare_extra_info("t", BASE, None, DEFAULTS)[0].failed
    assert _failed(compare_extra_info("t", {**BASE, "leaked_tokens": 1}, BASE, DEFAULTS))[
        "leaked_tokens"]


def test_missing_values_and_metrics_turned_off_are_not_judged() -> None:
    rows = compare_extra_info("t", {**BASE, "mean_ttft_ms": None}, {"hit_rate": 0.5},
                              {**DEFAULTS, "leaked_tokens": None})
    assert {r.metric for r in rows} == {"hit_rate"}


def test_thresholds_from_a_file_override_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "gate.toml"
    path.write_text('[metrics]\nrequest_throughput = "-5%"\nhit_rate = "off"\n'
                    'mean_ttft_ms = "+50%"\n')
    thresholds = load_thresholds(path).metrics
    new = {**BASE, "request_throughput": 9.4, "hit_rate": 0.1, "mean_ttft_ms": 140.0}
    failed = _failed(compare_extra_info("t", new, BASE, thresholds))
    assert failed["request_throughput"] and not failed["mean_ttft_ms"]
    assert "hit_rate" not in failed


def test_the_gate_matches_tests_by_fullname_and_reports_the_unmatched() -> None:
    mapping = {"/s/Linux/0001_x.json": {"a.py::t1": {"extra_info": BASE}}}
    entries = [("a.py::t1", {**BASE, "request_throughput": 5.0}), ("a.py::t2", BASE)]
    assert DEFAULTS["request_throughput"] < 0.5
    outcome = evaluate_gate(entries, mapping, DEFAULTS)
    assert [(r.test, r.metric) for r in outcome.failures] == [("a.py::t1", "request_throughput")]
    assert outcome.unmatched == ["a.py::t2"] and outcome.baselines == ["0001_x.json"]
    lines = summary_lines(outcome)
    assert "FAILED: 1 metric(s)" in lines[0] and "0001_x.json" in lines[0]
    assert lines[-1].split() == ["a.py::t1", "request_throughput", "10", "5", "-50.0%",
                                   f"-{DEFAULTS['request_throughput'] * 100:g}%"]
    assert format_table([])[0].split() == ["test", "metric", "base", "new", "change", "threshold"]
    assert "passed" in summary_lines(evaluate_gate([("a.py::t2", BASE)], {}, DEFAULTS))[0]


# --- inner sessions -------------------------------------------------------------------------

CONFTEST = """
import sys
sys.path.insert(0, {tests!r})

import pytest
from fakeserver import FakeServer

from bench.engine.target import Target


@pytest.fixture(scope="session")
def saltbench_target():
    with FakeServer() as fake:
        yield Target(fake.url, "fake", 32, None, {{"managed": False, "block_size": 32}})
"""

SPEC = """
[workload]
requests = 4
[arrival]
process = "constant"
rate = 50.0
"""

SCENARIO = """
def test_fake_scenario(saltbench):
    rounds = saltbench(spec={spec!r}, rounds=2, paths=["chat"], warmup=0)
    assert len(rounds) == 2 and all(r["passes"] for r in rounds)
"""

#: Throughputs and latencies of a fake server are noise: only hit_rate and leaks are gated.
LENIENT = """
[metrics]
mean_ttft_ms = "off"
median_ttft_ms = "off"
p99_ttft_ms = "off"
mean_tpot_ms = "off"
median_tpot_ms = "off"
p99_tpot_ms = "off"
mean_itl_ms = "off"
mean_e2el_ms = "off"
p99_e2el_ms = "off"
request_throughput = "off"
output_throughput = "off"
"""


@pytest.fixture
def fake_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An inner project whose ``saltbench_target`` is the fake server."""
    monkeypatch.setenv("SALTBENCH_CACHE", str(pytester.path / "cache"))
    monkeypatch.delenv("SALTBENCH_SERVER_URL", raising=False)
    pytester.makeconftest(CONFTEST.format(tests=str(Path(__file__).parent)))
    spec = pytester.path / "fake.toml"
    spec.write_text(SPEC)
    pytester.makepyfile(test_scenario=SCENARIO.format(spec=str(spec)))
    pytester.path.joinpath("lenient.toml").write_text(LENIENT)
    return pytester


def _saved(storage: Path) -> dict:
    (path,) = storage.rglob("*.json")
    return json.loads(path.read_text())


def test_the_plugin_is_harmless_when_unused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import sys

        def test_nothing_of_saltbench_is_loaded(request):
            assert request.config.pluginmanager.has_plugin("saltbench")
            loaded = [m for m in sys.modules if m.startswith("bench.")]
            assert loaded == ["bench.pytest_plugin"], loaded
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_bad_gate_options_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    bad = pytester.path / "bad.toml"
    bad.write_text('[metrics]\nrequest_throughput = "+5%"\n')
    result = pytester.runpytest_subprocess("--saltbench-thresholds", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--saltbench-thresholds needs --saltbench-gate*"])
    result = pytester.runpytest_subprocess("--saltbench-gate", "--saltbench-thresholds", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*request_throughput is higher-is-better*"])


def test_save_compare_and_gate_a_scenario_on_the_fake_server(fake_session: pytest.Pytester) -> None:
    storage = fake_session.path / "storage"
    result = fake_session.runpytest_subprocess("--benchmark-autosave",
                                               f"--benchmark-storage={storage}")
    result.assert_outcomes(passed=1)
    saved = _saved(storage)
    (bench,) = saved["benchmarks"]
    info = bench["extra_info"]
    assert bench["stats"]["rounds"] == 2
    assert info["completed"] == 16  # 4 requests x 2 salt modes x 2 rounds
    assert info["hit_rate"] == 0.0 and info["leaked_tokens"] == 0
    assert info["request_throughput"] > 0 and info["mean_ttft_ms"] > 0
    assert info[DIRECTIONS_KEY]["request_throughput"] == "higher"
    assert info[DIRECTIONS_KEY]["leaked_tokens"] == "zero"
    assert set(info[GROUPS_KEY]) == {"chat/none", "chat/salted"}

    gate = ("--benchmark-compare", f"--benchmark-storage={storage}", "--saltbench-gate",
            "--saltbench-thresholds", str(fake_session.path / "lenient.toml"))
    result = fake_session.runpytest_subprocess(*gate)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*saltbench gate (against 0001_*1 test(s), 1 comparison(s): passed"])

    # A baseline with a better hit rate: the new run's drop fails the session.
    path = next(storage.rglob("0001_*.json"))
    saved["benchmarks"][0]["extra_info"]["hit_rate"] = 0.5
    path.write_text(json.dumps(saved))
    result = fake_session.runpytest_subprocess(*gate)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*FAILED: 1 metric(s) out of bounds*",
                                 "test * metric * base * new * change * threshold",
                                 "*test_fake_scenario * hit_rate * 0.5 * 0 * -50.0pp * -2pp"])
