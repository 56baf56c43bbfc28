"""A run whose requests fail in different ways (fake server): every request is recorded,
the failures are counted by kind and shown in every report.

Nothing here is evidence of how vLLM behaves; only of what the runner does with it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeserver import CHAT_REPLY, TOKEN_EVENT, FakeServer
from rich.console import Console

from bench.engine.target import Target
from bench.measured.records import read_records
from bench.report.html import page
from bench.report.load import load_run
from bench.report.markdown import summary
from bench.report.tables import print_summary
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.verdicts.runs import problems
from bench.vocab import Failure
from bench.workload import generate, load_workload

SPEC = """
[workload]
requests = 8
[arrival]
process = "constant"
rate = 50.0
"""
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
PLAN = [  # what the server does with the n-th request (they go one at a time)
    CHAT_REPLY,
    [{"status": 500, "json": {"error": {"message": ENGINE_DEAD, "type": "InternalServerError",
                                        "param": None, "code": 500}}}],
    [TOKEN_EVENT, TOKEN_EVENT],
    [TOKEN_EVENT, 0.02, "RESET"],
    [5.0],
    [{"status": 400, "json": {"error": {"message": "Parameter 'cache_salt' must be a non-empty "
                                                   "string if provided. (parameter=cache_salt)",
                                        "type": "BadRequestError", "param": "cache_salt",
                                        "code": 400}}}],
    [TOKEN_EVENT, 0.1] * 20,
    [{"status": 502, "text": "<html><body>502 Bad Gateway</body></html>",
      "content_type": "text/html"}],
]
FAILURES = {Failure.TIMEOUT_FIRST_BYTE: 1, Failure.TIMEOUT_TOTAL: 1, Failure.RESET: 1,
            Failure.HTTP_4XX: 1, Failure.HTTP_5XX: 2, Failure.NO_DONE: 1}


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, Path]]:
    root = tmp_path_factory.mktemp("faults")
    spec = root / "faults.toml"
    spec.write_text(textwrap.dedent(SPEC))
    workload = load_workload(generate(spec, out=root / "wl"))
    with FakeServer(chat_plan=PLAN) as fake:
        target = Target(fake.url, "fake", 32, None, {"managed": False, "block_size": 32})
        opts = RunOptions(paths=["chat"], salt_modes=["none"], warmup=0, timeout_s=1.0,
                          first_byte_timeout_s=0.5)
        results = run_benchmark(target, workload, opts, root / "run",
                                "20261202-000000-fault-abcdef", Console(stderr=True))
    yield results, root / "run"


def test_every_request_is_recorded_and_failures_counted_by_kind(faulty_run) -> None:
    results, out = faulty_run
    records = read_records(out / "records.jsonl")
    assert len(records) == len(PLAN)
    assert [r["failure"] for r in records] == [
        None, Failure.HTTP_5XX, Failure.NO_DONE, Failure.RESET, Failure.TIMEOUT_FIRST_BYTE,
        Failure.HTTP_4XX, Failure.TIMEOUT_TOTAL, Failure.HTTP_5XX]
    assert all(r["error"] for r in records if not r["ok"])
    (summary_,) = results["passes"]
    assert (summary_["completed"], summary_["failed"]) == (1, 7)
    assert summary_["failures"] == FAILURES
    assert list(summary_["failures"]) == [Failure.TIMEOUT_FIRST_BYTE, Failure.TIMEOUT_TOTAL,
                                          Failure.RESET, Failure.HTTP_4XX, Failure.HTTP_5XX,
                                          Failure.NO_DONE]  # report order
    assert summary_["failure_examples"][Failure.HTTP_5XX] == f"HTTP 500: {ENGINE_DEAD}"
    assert problems(results)[0] == ("7 measured request(s) failed (1 timeout-first-byte, "
                                    "1 timeout-total, 1 reset, 1 http-4xx, 2 http-5xx, "
                                    "1 no-done)")


def test_failures_are_shown_in_every_report(faulty_run) -> None:
    results, out = faulty_run
    console = Console(record=True, width=250)
    print_summary(results, console)
    shown = {"console": console.export_text(), "markdown": summary([load_run(out)]),
             "html": page([load_run(out)], {})}
    for where, text in shown.items():
        assert "Failed requests (measure phase)" in text, where
        assert "timeout-first-byte" in text and "stream ended without [DONE]" in text, where
        assert ENGINE_DEAD in text, where
