"""``--workers``: the measured requests of a pass sent by several processes, records merged
(against the zero-work server: the subject is saltbench's runner)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cliproc import saltbench_process

from bench.results import read_results
from bench.run.records import read_records
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
