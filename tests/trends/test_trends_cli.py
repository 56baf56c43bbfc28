"""``trends`` on the real compare fixtures (tiny model, one server start each): the strip,
the dashboard and the exit code of a nightly job; ordering; bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.cli import main
from bench.outputs import RESULTS_FILE
from bench.trends.build import TRENDS_FILE, TRENDS_KIND
from bench.vocab import KV, LEAK

FIXTURES = Path(__file__).parents[1] / "fixtures" / "compare"


def _trends(tmp_path: Path, *argv: str) -> tuple[int, dict]:
    out = tmp_path / "trends"
    code = main(["trends", *argv, "--out", str(out)])
    doc = json.loads((out / TRENDS_FILE).read_text()) if (out / TRENDS_FILE).exists() else {}
    return code, doc


def test_a_leak_in_the_newest_run_fails_the_nightly_job(tmp_path: Path) -> None:
    code, doc = _trends(tmp_path, *(str(FIXTURES / r) for r in ("base", "same", "leak")),
                        "--order", "given")
    assert code == 1 and doc["kind"] == TRENDS_KIND
    assert [e["boundary"][KV] for e in doc["entries"]][-1] == LEAK
    assert doc["newest"]["boundary_findings"] == [KV] and doc["newest"]["problems"]
    out = tmp_path / "trends"
    page = (out / "index.html").read_text()
    assert "LEAK" in page and all((out / f"trend-{m}.svg").exists()
                                  for m in ("median_ttft_ms", "request_throughput"))
    assert "kv-cache" in (out / "trends.md").read_text()
    # no goodput without objectives; one series per metric x group, a point per run
    assert not any(s["metric"] == "slo_attainment" for s in doc["series"])
    assert all(len(s["points"]) == 3 for s in doc["series"])


def test_runs_without_findings_pass_and_order_by_version(tmp_path: Path) -> None:
    runs = []
    for name, version in (("base", "0.31.0"), ("same", "0.30.0.dev12+gabc1234"),
                          ("slow", "0.30.0")):
        copy = tmp_path / name
        shutil.copytree(FIXTURES / name, copy)
        results = json.loads((copy / RESULTS_FILE).read_text())
        results["metadata"]["target"]["vllm_version"] = version
        (copy / RESULTS_FILE).write_text(json.dumps(results))
        runs.append(str(copy))
    assert main(["report", runs[0]]) == 0  # "base" has its report; the others do not
    code, doc = _trends(tmp_path, *runs)
    assert code == 0, doc["newest"]
    assert [e["label"] for e in doc["entries"]] == ["0.30.0.dev12+gabc1234", "0.30.0", "0.31.0"]
    # the dashboard links each run's report where it has one, else its results
    page = (tmp_path / "trends" / "index.html").read_text()
    assert '<a href="../base/index.html">report</a>' in page
    assert f'<a href="../slow/{RESULTS_FILE}">results</a>' in page


def test_bad_input_is_exit_2_naming_it(tmp_path: Path, capsys) -> None:
    assert main(["trends", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "missing" in capsys.readouterr().err
    assert main(["trends", "--runs-in", str(tmp_path / "nowhere")]) == 2
    assert "--runs-in" in capsys.readouterr().err
    assert main(["trends"]) == 2 and "no runs given" in capsys.readouterr().err


def test_fail_on_chooses_the_channels_whose_finding_fails(tmp_path: Path) -> None:
    """As in ``run`` and ``matrix``: a finding on a channel not in --fail-on is shown in the
    strip, not counted against the newest run (its problems still are)."""
    runs = [str(FIXTURES / r) for r in ("base", "same", "leak")]
    _, doc = _trends(tmp_path, *runs, "--order", "given", "--fail-on", "none")
    assert doc["entries"][-1]["boundary"][KV] == LEAK
    assert doc["newest"]["boundary_findings"] == [] and doc["settings"]["fail_on"] == []
