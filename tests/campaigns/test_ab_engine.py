"""A real A/B through the CLI, with few requests: the same build against itself (two start
pairs: both sides restart), and against itself with every engine step made 100% slower
(the test-only slow-down; one start pair, so it cannot be judged, but its change is
measured on the right side). Requests pair by unit, and cached tokens, which do not depend
on timing on a serial run, compare exactly. The gate's false-alarm and detection rates are
those of tests/compare/test_paired.py (simulated) and docs/ab.md (measured)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cliproc import saltbench_process
from slowdown import slowed_python

from bench.engine.provision import provision
from bench.engine.spec import default_engine_spec
from bench.vocab import INCONCLUSIVE, NO_CHANGE

#: Few requests: one path, salted, 4 requests a block, one block per start pair.
SMALL = ("--spec", "smoke", "--requests", "4", "--paths", "chat", "--salt-modes", "salted",
         "--blocks", "1", "--warmup", "1")


def _ab(tmp_path: Path, name: str, base: Path, new: Path, *extra: str) -> tuple[int, dict, dict]:
    out = tmp_path / name
    with saltbench_process("ab", "--base", str(base), "--new", str(new), "--out", str(out),
                           *SMALL, *extra) as proc:
        stdout, stderr = proc.communicate(timeout=1500)
    assert (out / "compare" / "compare.json").exists(), stderr[-3000:]
    return (proc.returncode, json.loads((out / "ab.json").read_text()),
            json.loads((out / "compare" / "compare.json").read_text()))


@pytest.fixture(scope="module")
def engine_python() -> Path:
    return provision(default_engine_spec()).python


def _rows(doc: dict, metric: str, overall: bool) -> list[dict]:
    return [r for r in doc["rows"] if r["metric"] == metric and (r["path"] == "all") == overall]


def test_same_build_and_slowed_ab(engine_python: Path, tmp_path: Path):
    strict = tmp_path / "strict.toml"  # a false alarm at most 0.1% of the time
    strict.write_text("confidence = 0.999\n")
    code, ab, doc = _ab(tmp_path, "same", engine_python, engine_python, "--starts", "2",
                        "--thresholds", str(strict))
    assert ab["status"] == "complete" and len(ab["schedule"]) == 2
    assert {r["start"] for r in ab["schedule"]} == {0, 1}
    assert doc["ab"] == ab["id"]
    assert code in (0, 2), doc["summary"]  # never a failure: the same build
    hit = _rows(doc, "hit_rate", overall=False)
    assert hit and all(r["state"] == NO_CHANGE and r["low"] == r["high"] == 0 and r["gated"]
                       for r in hit), hit
    ttft = _rows(doc, "median_ttft_ms", overall=True)[0]
    assert ttft["gated"] and ttft["units"] == 2 and ttft["starts"] == 2

    slowed = slowed_python(engine_python, 1.0, tmp_path / "wrappers")
    code, _, doc = _ab(tmp_path, "slowed", engine_python, slowed, "--starts", "1")
    ttft = _rows(doc, "median_ttft_ms", overall=True)[0]
    assert ttft["change"] > 0.3, ttft  # twice as slow per engine step, on the new side
    assert code == 2 and ttft["state"] == INCONCLUSIVE and "start pair" in ttft["reason"]
    hit = _rows(doc, "hit_rate", overall=False)
    assert hit and all(r["change"] == 0 for r in hit), hit  # one unit: equal, not yet exact
