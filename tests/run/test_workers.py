"""``--workers``: the measured requests of a pass sent by several processes, records merged
(against the zero-work server: the subject is saltbench's runner)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from cliproc import saltbench_process

from bench.measured.records import read_records
from bench.results import read_results
from bench.run.settings import RunOptions
from bench.run.workers import sender, slots, worker_count
from bench.zerowork.process import ZeroWorkServer


def test_two_workers_send_every_request_once_and_the_records_merge(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with ZeroWorkServer() as server, saltbench_process(
            "run", "--server-url", server.url, "--spec", "clientbench-text", "--requests", "300",
            "--paths", "chat", "--salt-modes", "none", "--max-concurrency", "8",
            "--workers", "2", "--out", str(out)) as proc:
        _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    records = read_records(out / "records.jsonl")
    measured = [r for r in records if r["phase"] == "measure"]
    assert Counter(r["request_id"] for r in measured).most_common(1)[0][1] == 1
    assert len(measured) == 300 and all(r["ok"] for r in measured)
    assert sorted(r["seq"] for r in records) == list(range(1, len(records) + 1))
    ends = [r["end_s"] for r in sorted(measured, key=lambda r: r["seq"])]
    assert ends == sorted(ends), "seq is the order in which requests finished"
    (p,) = read_results(out / "results.json")["passes"]
    assert p["counters_agree"] is True and p["completed"] == 300
    assert not list(out.glob(".records.jsonl.w*")), "worker parts are merged and removed"


def max_in_flight(records: list[dict]) -> int:
    """The most requests whose [start_s, end_s] intervals overlap at one instant."""
    events = sorted([(r["start_s"], 1) for r in records] + [(r["end_s"], -1) for r in records],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    depth = peak = 0
    for _, step in events:
        depth += step
        peak = max(peak, depth)
    return peak


@pytest.mark.parametrize("concurrency, workers", [(1, 2), (3, 2)])
def test_workers_share_the_concurrency(tmp_path: Path, concurrency: int, workers: int) -> None:
    """At most --max-concurrency requests in flight in all processes together (each request
    takes 60 ms or more, so workers with slots of their own would overlap)."""
    out = tmp_path / "run"
    with ZeroWorkServer(itl_ms=20.0, output_tokens=4) as server, saltbench_process(
            "run", "--server-url", server.url, "--spec", "clientbench-text", "--requests", "40",
            "--paths", "chat", "--salt-modes", "none", "--warmup", "0", "--rate", "inf",
            "--max-concurrency", str(concurrency), "--workers", str(workers),
            "--out", str(out)) as proc:
        _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    measured = [r for r in read_records(out / "records.jsonl") if r["phase"] == "measure"]
    assert len(measured) == 40 and all(r["ok"] for r in measured)
    assert 1 <= max_in_flight(measured) <= concurrency
    if concurrency < workers:
        assert f"--workers {workers}: {concurrency} worker(s)" in stderr


def test_slots_sum_to_the_concurrency_and_requests_follow_the_slots() -> None:
    for concurrency in (1, 2, 3, 7, 64):
        for workers in range(1, concurrency + 1):
            shares = [slots(k, workers, concurrency) for k in range(workers)]
            assert sum(shares) == concurrency and min(shares) >= 1
            sent = Counter(sender(i, workers, concurrency) for i in range(concurrency * 10))
            assert [sent[k] for k in range(workers)] == [10 * s for s in shares]
    assert slots(1, 2, None) is None
    assert [sender(i, 3, None) for i in range(6)] == [0, 1, 2, 0, 1, 2]
    assert worker_count(RunOptions(paths=["chat"], max_concurrency=1, workers=2)) == 1
    assert worker_count(RunOptions(paths=["chat"], max_concurrency=3, workers=2)) == 2
    assert worker_count(RunOptions(paths=["chat"], max_concurrency=None, workers=4)) == 4
