"""A matrix ends with its engines as series (the trends dashboard), on the real compare
fixtures standing in for the engines' run directories; an engine that did not run is left
out, and runs that cannot be trended say why instead of failing the matrix."""

from __future__ import annotations

import json
from pathlib import Path

from bench.campaigns.matrix import trend_engines
from bench.report.markdown import matrix_summary
from bench.trends.build import TRENDS_FILE

FIXTURES = Path(__file__).parents[1] / "fixtures" / "compare"


def _doc(*engines: dict) -> dict:
    return {"workload": {"name": "smoke", "sha256": "0" * 64}, "engines": list(engines),
            "comparisons": []}


def test_the_engines_that_ran_become_series(tmp_path: Path) -> None:
    doc = _doc({"engine": "a", "status": "ok", "dir": str(FIXTURES / "base")},
               {"engine": "b", "status": "n/a", "dir": str(tmp_path / "never")},
               {"engine": "c", "status": "ok", "dir": str(FIXTURES / "leak")})
    trend_engines(doc, None, tmp_path / "trends")
    trends = json.loads((tmp_path / "trends" / TRENDS_FILE).read_text())
    assert [e["dirs"] for e in trends["entries"]] == [[str(FIXTURES / "base")],
                                                      [str(FIXTURES / "leak")]]
    assert doc["trends"]["exit_code"] == trends["exit_code"] == 1  # the newest leaked
    assert Path(doc["trends"]["dashboard"]).read_text().count("<figure>") >= 2
    assert "trends exit 1" in matrix_summary(doc)


def test_runs_that_cannot_be_trended_say_why(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    doc = _doc({"engine": "a", "status": "ok", "dir": str(tmp_path / "empty")})
    trend_engines(doc, None, tmp_path / "trends")
    assert doc["trends"]["error"] and "No trends:" in matrix_summary(doc)
    doc = _doc({"engine": "a", "status": "n/a", "dir": "x"})
    trend_engines(doc, None, tmp_path / "trends")
    assert doc["trends"] == {"error": "no engine ran"}
