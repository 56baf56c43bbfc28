"""The pytest plugin on the real engine: inner pytest sessions (pytester) run saltbench
scenarios under pytest-benchmark against the outer session's server, save a baseline,
compare and gate against it, and fail the session on leaked tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.engine.target import Target
from bench.pytest_plugin import DIRECTIONS_KEY, GROUPS_KEY

pytest_plugins = ["pytester"]

SMOKE = """
from bench.verdicts.runs import problems


def test_smoke_scenario(saltbench):
    rounds = saltbench(spec="smoke", requests=4, rounds=2, paths=["chat", "generate-parts"],
                       warmup=1)
    assert len(rounds) == 2
    assert all(not problems(results) for results in rounds), [problems(r) for r in rounds]
"""

LEAK = """
def test_dropped_salt_scenario(saltbench):
    # A global system prompt shared by tenants of different salts, sent without the salt.
    saltbench(spec="mixed-tenants", requests=8, rounds=1, paths=["chat"], salt_modes=["salted"],
              warmup=0, rate=float("inf"), drop_salt_on=("chat",))
"""

#: Timing on a shared 2-core machine is noise at this size: only gross changes fail.
#: hit_rate keeps its default (-2pp): served one at a time, it is the same in every run.
LENIENT = """
[metrics]
mean_ttft_ms = "+1000%"
median_ttft_ms = "+1000%"
p99_ttft_ms = "+1000%"
mean_tpot_ms = "+1000%"
median_tpot_ms = "+1000%"
p99_tpot_ms = "+1000%"
mean_itl_ms = "+1000%"
mean_e2el_ms = "+1000%"
p99_e2el_ms = "+1000%"
request_throughput = "-90%"
output_throughput = "-90%"
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("SALTBENCH_SERVER_URL", raising=False)  # the URL is passed explicitly
    pytester.makepyfile(test_smoke=SMOKE, test_leak=LEAK)
    pytester.path.joinpath("lenient.toml").write_text(LENIENT)
    return pytester


def _saved(storage: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(storage.rglob("*.json"))]


def test_a_scenario_is_saved_compared_and_gated(inner: pytest.Pytester, target: Target) -> None:
    server = ("--saltbench-server-url", target.base_url)
    storage = inner.path / "storage"
    result = inner.runpytest_subprocess("test_smoke.py", *server, "--benchmark-autosave",
                                        f"--benchmark-storage={storage}", timeout=600)
    result.assert_outcomes(passed=1)
    (saved,) = _saved(storage)
    (bench,) = saved["benchmarks"]
    info = bench["extra_info"]
    assert bench["stats"]["rounds"] == 2
    assert info["completed"] == 4 * 2 * 2 * 2  # requests x paths x salt modes x rounds
    assert info["failed"] == 0
    assert info["leaked_tokens"] == 0 and 0 <= info["hit_rate"] <= 1
    assert info["mean_ttft_ms"] > 0 and info["p99_ttft_ms"] >= info["mean_ttft_ms"]
    assert info["request_throughput"] > 0 and info["output_throughput"] > 0
    assert info[DIRECTIONS_KEY]["hit_rate"] == "higher"
    assert info[DIRECTIONS_KEY]["p99_ttft_ms"] == "lower"
    assert set(info[GROUPS_KEY]) == {"chat/none", "chat/salted", "generate-parts/none",
                                     "generate-parts/salted"}

    result = inner.runpytest_subprocess(
        "test_smoke.py", *server, "--benchmark-compare", f"--benchmark-storage={storage}",
        "--saltbench-gate", "--saltbench-thresholds", str(inner.path / "lenient.toml"),
        timeout=600)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*saltbench gate (against 0001_*1 test(s), * comparison(s): passed"])


def test_leaked_tokens_fail_the_gate(inner: pytest.Pytester, target: Target) -> None:
    result = inner.runpytest_subprocess("test_leak.py", "--saltbench-server-url", target.base_url,
                                        "--saltbench-gate", timeout=600)
    result.assert_outcomes(passed=1)  # the test itself passes; the gate fails the session
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*no --benchmark-compare run: leaks only*FAILED: 1 metric(s)*",
                                 "test * metric * base * new * change * threshold",
                                 "*test_dropped_salt_scenario*leaked_tokens*must be 0"])
