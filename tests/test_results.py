"""Results assembly from records (no server)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.measured.records import PassInfo, PassLines, read_records
from bench.outputs import LAYOUTS_FILE, RECORDS_FILE, RESULTS_FILE
from bench.results import PassTally, build_results
from bench.verdicts.runs import problems

FIXTURES = Path(__file__).parent / "fixtures"


def hit_miss_ttft(records: list[dict]) -> dict:
    tally = PassTally()
    for r in records:
        tally.add_outcome(r)
    return tally.hit_miss_ttft()


def test_hit_and_miss_ttft_split_on_cached_tokens() -> None:
    recs = [{"ok": True, "cached_tokens": 64, "ttft_ms": 10.0},
            {"ok": True, "cached_tokens": 64, "ttft_ms": 20.0},
            {"ok": True, "cached_tokens": 0, "ttft_ms": 100.0},
            {"ok": False, "cached_tokens": None, "ttft_ms": None}]
    out = hit_miss_ttft(recs)
    assert (out["hit_count"], out["miss_count"]) == (2, 1)
    assert out["p50_ttft_hit_ms"] == 15.0 and out["p50_ttft_miss_ms"] == 100.0
    assert hit_miss_ttft([])["p99_ttft_hit_ms"] is None


def _common(stored: object, rebuilt: object) -> object:
    """``rebuilt`` cut down to the keys ``stored`` has (fields added since it was made)."""
    if isinstance(stored, dict) and isinstance(rebuilt, dict):
        return {k: _common(stored[k], rebuilt[k]) for k in stored if k in rebuilt}
    if isinstance(stored, list) and isinstance(rebuilt, list) and len(stored) == len(rebuilt):
        return [_common(s, r) for s, r in zip(stored, rebuilt)]
    return rebuilt


@pytest.mark.parametrize("run", ["base", "leak"])
def test_results_built_a_pass_at_a_time_match_the_real_runs_results(run: str) -> None:
    """The compare fixtures' results.json were built with every record in memory; built
    again streamed (a pass at a time, a record at a time) they must not change."""
    directory = FIXTURES / "compare" / run
    stored = json.loads((directory / RESULTS_FILE).read_text())
    names = {f.name for f in dataclasses.fields(PassInfo)}
    passes = [PassInfo(**{k: v for k, v in p.items() if k in names}) for p in stored["passes"]]
    rebuilt = build_results(stored["run_id"], stored["metadata"], passes,
                            PassLines(directory / RECORDS_FILE),
                            PassLines(directory / LAYOUTS_FILE), stored["interrupted"],
                            stored["unavailable"], stored.get("stopped"))
    rebuilt = json.loads(json.dumps(rebuilt))
    assert _common(stored, rebuilt) == stored
    assert rebuilt["judgements"]["counts"]["leak"] == (4 if run == "leak" else 0)


def test_a_missing_layout_in_a_real_run_hides_none_of_its_leaks(tmp_path: Path) -> None:
    """The ``leak`` fixture (the salt dropped on generate-parts, 4 leaks) with one render
    lost: its last measured request of a leaking pass. That used to leave the whole pass
    unjudged (2 of the 4 leaks unseen); now that one request is counted without a layout,
    the rest judged as before, and the run fails for it too."""
    directory = FIXTURES / "compare" / "leak"
    stored = json.loads((directory / RESULTS_FILE).read_text())
    leaking = stored["judgements"]["problems"][0]["pass"]
    last = max((r for r in read_records(directory / RECORDS_FILE)
                if r["pass"] == leaking and r["phase"] == "measure"), key=lambda r: r["seq"])
    kept = [line for line in (directory / LAYOUTS_FILE).read_text().splitlines()
            if (json.loads(line)["pass"], json.loads(line)["request_id"]) !=
            (leaking, last["request_id"])]
    (tmp_path / LAYOUTS_FILE).write_text("\n".join(kept) + "\n")
    names = {f.name for f in dataclasses.fields(PassInfo)}
    passes = [PassInfo(**{k: v for k, v in p.items() if k in names}) for p in stored["passes"]]
    rebuilt = build_results(stored["run_id"], stored["metadata"], passes,
                            PassLines(directory / RECORDS_FILE), PassLines(tmp_path / LAYOUTS_FILE),
                            stored["interrupted"], stored["unavailable"], stored.get("stopped"))
    counts = rebuilt["judgements"]["counts"]
    assert (counts["leak"], counts["leaked_tokens"], counts["no-layout"]) == (4, 1536, 1)
    assert counts["judged"] == stored["judgements"]["counts"]["judged"] - 1
    assert any("1 without a layout" in p for p in problems(rebuilt)), problems(rebuilt)
