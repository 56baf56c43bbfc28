"""A server that restarts in the middle of a run (the zero-work server, killed and started
again on its port): the requests it dropped are failed records, the run goes on, and the
pass whose counters span the restart reports no delta instead of a negative or mixed one."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from cliproc import saltbench_process

from bench.measured.records import read_records
from bench.results import read_results
from bench.vocab import Failure
from bench.zerowork.process import ZeroWorkServer


def test_a_restarted_server_is_detected_and_no_counter_delta_mixes_two_servers(
        tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = ZeroWorkServer(itl_ms=10, output_tokens=8)
    with first:
        port = first.port
        with saltbench_process("run", "--server-url", first.url, "--spec", "smoke",
                               "--paths", "chat", "--salt-modes", "salted", "--warmup", "0",
                               "--max-concurrency", "2", "--out", str(out)) as proc:
            records = out / "records.jsonl"
            deadline = time.monotonic() + 60
            while not (records.exists() and records.read_text().count("\n") >= 4):
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.05)
            first.stop()  # requests in flight are cut
            with ZeroWorkServer(itl_ms=10, output_tokens=8, port=port):
                _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr  # failed requests, not a stopped run
    results = read_results(out / "results.json")
    assert results["stopped"] is None
    (measured_pass,) = results["passes"]
    assert "restarted" in measured_pass["counters_error"], measured_pass
    assert measured_pass["counters"] == {} and measured_pass["counters_agree"] is None
    failed = Counter(r["failure"] for r in read_records(records) if not r["ok"])
    assert failed and set(failed) <= {Failure.RESET, Failure.CONNECT}, failed
