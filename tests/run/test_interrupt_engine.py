"""Ctrl-C in the middle of a run loses no finished record and leaves readable results,
also when saltbench was started with SIGINT ignored (a background job of a script)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from cliproc import saltbench_process

from bench.engine.target import Target
from bench.measured.records import read_records
from bench.results import read_results


def test_interrupted_run_keeps_every_record(target: Target, tmp_path: Path) -> None:
    out = tmp_path / "run"
    records = out / "records.jsonl"
    with saltbench_process("run", "--spec", "mixed-tenants", "--requests", "200",
                           "--server-url", target.base_url, "--out", str(out)) as proc:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if records.exists() and records.read_text().count("\n") >= 5:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "run interrupted" in stderr
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(read_records(records)) == len(lines) >= 5
    results = read_results(out / "results.json")
    assert results["interrupted"] is True
    assert results["passes"], "the pass under way is in the results"
