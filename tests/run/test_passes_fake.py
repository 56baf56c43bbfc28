"""saltbench's own runner against a fake server: files, schedule and refusals.

Nothing here is evidence of how vLLM behaves (tests/engine is); only of what the runner
does with whatever a fake server answers.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from bench.engine.target import Target
from bench.errors import BenchError
from bench.measured.records import read_records
from bench.results import read_results
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.workload import generate, load_workload

SPEC = """
[workload]
requests = 5
[arrival]
process = "constant"
rate = 20.0
"""


@pytest.fixture
def workload(tmp_path: Path):
    spec = tmp_path / "fake.toml"
    spec.write_text(textwrap.dedent(SPEC))
    return load_workload(generate(spec, out=tmp_path / "wl"))


def _run(fake_server, workload, out: Path, **opts) -> dict:
    target = Target(fake_server.url, "fake", 32, None, {"managed": False, "block_size": 32})
    return run_benchmark(target, workload, RunOptions(paths=["chat"], warmup=0, **opts), out,
                         "20261202-000000-fake-abcdef", Console(stderr=True))


def test_records_and_results_are_written(fake_server, workload, tmp_path: Path) -> None:
    results = _run(fake_server, workload, tmp_path / "run")
    records = read_records(tmp_path / "run" / "records.jsonl")
    assert len(records) == 2 * 5  # two salt modes
    assert read_results(tmp_path / "run" / "results.json")["run_id"] == results["run_id"]
    assert {r["salt_mode"] for r in records} == {"none", "salted"}
    assert all(r["ok"] and r["prompt_tokens"] == 100 for r in records)


def test_the_workload_arrival_times_are_kept_unless_a_rate_is_given(fake_server, workload,
                                                                     tmp_path: Path) -> None:
    arrivals = [r["arrival_s"] for r in workload.requests()]
    assert arrivals[-1] == pytest.approx(4 / 20.0)
    _run(fake_server, workload, tmp_path / "a", salt_modes=["none"])
    starts = [r["start_s"] for r in read_records(tmp_path / "a" / "records.jsonl")]
    assert starts[-1] - starts[0] >= arrivals[-1] * 0.9  # paced by the workload
    _run(fake_server, workload, tmp_path / "b", salt_modes=["none"], rate=float("inf"),
         max_concurrency=None)
    starts = [r["start_s"] for r in read_records(tmp_path / "b" / "records.jsonl")]
    assert starts[-1] - starts[0] < arrivals[-1] * 0.5  # all at once


def test_a_directory_that_holds_a_run_is_refused(fake_server, workload, tmp_path: Path) -> None:
    _run(fake_server, workload, tmp_path / "run", salt_modes=["none"])
    with pytest.raises(BenchError, match="already holds the records of a run"):
        _run(fake_server, workload, tmp_path / "run", salt_modes=["none"])


def test_pass_order_alternates_between_repetitions() -> None:
    from bench.run.passes import pass_order

    paths = ["a", "b"]
    assert pass_order(paths, ["none", "salted"], 0) == [
        ("a", "none"), ("a", "salted"), ("b", "none"), ("b", "salted")]
    assert pass_order(paths, ["none", "salted"], 1) == [
        ("b", "salted"), ("b", "none"), ("a", "salted"), ("a", "none")]
    assert pass_order(paths, ["none"], 2) == pass_order(paths, ["none"], 0)


def test_goodput_objectives_reach_results_and_reports(fake_server, workload,
                                                      tmp_path: Path) -> None:
    from bench.report.load import load_run
    from bench.report.markdown import summary

    results = _run(fake_server, workload, tmp_path / "run", salt_modes=["salted"],
                   goodput={"ttft": 60000.0})
    assert results["metadata"]["options"]["goodput"] == {"ttft": 60000.0}
    (group,) = results["groups"]
    assert (group["good_requests"], group["slo_attainment"]) == (5, 1.0)
    assert group["request_goodput"] == pytest.approx(group["request_throughput"])
    strict = _run(fake_server, workload, tmp_path / "strict", salt_modes=["salted"],
                  goodput={"ttft": 0.0})
    assert strict["passes"][0]["good_requests"] == 0
    text = summary([load_run(tmp_path / "run")])
    assert "Goodput (objectives: ttft <= 60000 ms" in text and "| 5/5 | 100.0% |" in text
