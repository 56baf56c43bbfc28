"""``compare`` on real runs of the tiny model (tests/fixtures/compare, made by
make_compare_fixtures.py, each run on its own server start): pure noise, a real slow-down,
an isolation loss, runs that cannot be compared, and bad input, each with its states and
exit code; sets of runs (one per server start) built from copies of them; and copies
edited to fail requests or serve fewer paths (issue 28: the gate fails closed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.cli import main
from bench.compare.dashboard import BIGGER, SMALLER
from bench.compare.pair import compare_runs
from bench.compare.samples import load_side
from bench.compare.thresholds import Settings, Thresholds
from bench.outputs import COMPARE_FILE, COMPARE_KIND, COMPARE_MD, ISOLATION_FILE, RECORDS_FILE, RESULTS_FILE
from bench.results import rebuild_results
from bench.vocab import (
    ERROR,
    INCONCLUSIVE,
    ISOLATED,
    LEAK,
    MEASURE,
    NO_CHANGE,
    NOT_AVAILABLE,
    REGRESSED,
    UNDER_HIT,
    Failure,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "compare"


def _compare(tmp_path: Path, base: str | Path, new: str | Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "cmp"
    code = main(["compare", str(FIXTURES / base), str(FIXTURES / new), "--out", str(out), *extra])
    doc = json.loads((out / COMPARE_FILE).read_text()) if (out / COMPARE_FILE).exists() else {}
    return code, doc


def _judged(base: str | Path, new: str | Path, **settings: str) -> dict:
    """The comparison document alone (no files written: faster than the command)."""
    thresholds = Thresholds(settings=Settings(**settings))
    return compare_runs(load_side(FIXTURES / base), load_side(FIXTURES / new), thresholds, {})


def _states(doc: dict, **match: str) -> dict[str, str]:
    return {r["metric"]: r["state"] for r in doc["rows"]
            if all(r[k] == v for k, v in match.items())}


def run_set(tmp_path: Path, name: str, *runs: str | Path) -> Path:
    """A directory of copies of ``runs`` (fixture names or directories), one per server
    start, named 1, 2, ... in order; a repeated run gets its own run id (another start)."""
    root = tmp_path / name
    for i, run in enumerate(runs, 1):
        shutil.copytree(FIXTURES / run, root / str(i))
        results = json.loads((root / str(i) / RESULTS_FILE).read_text())
        results["run_id"] = f"{results['run_id']}-{name}-{i}"
        (root / str(i) / RESULTS_FILE).write_text(json.dumps(results))
    return root


def test_the_same_build_twice_cannot_be_judged_on_one_server_start_each(tmp_path: Path) -> None:
    """Two starts of one build differ by ~25% in TTFT: one start per side cannot rule out a
    40% regression, whatever its repetitions say: exit 2 (fail closed), not a pass, and the
    reason says to compare sets of runs; a deterministic hit rate stays exact; no row
    regressed; --allow-inconclusive reports them."""
    code, doc = _compare(tmp_path, "base", "same")
    assert code == 2 and doc["kind"] == COMPARE_KIND and doc["exit_code"] == 2
    assert doc["summary"]["gate failures"] == 0 and doc["summary"]["cannot judge"] > 0
    assert not any(r["state"] == REGRESSED for r in doc["rows"])
    timing = [r for r in doc["rows"] if r["metric"] in ("mean_ttft_ms", "p99_ttft_ms",
                                                         "request_throughput")]
    assert timing and all(r["state"] == INCONCLUSIVE and r["low"] is None for r in timing)
    assert all("one server start per side cannot separate a change from the start-to-start "
               "spread" in r["reason"] and "e.g. 3 per side" in r["reason"] for r in timing)
    exact = [r for r in doc["rows"] if r["metric"] == "hit_rate" and r["low"] is not None]
    assert len(exact) >= 6 and all(r["state"] == NO_CHANGE and r["low"] == r["high"] == 0
                                   for r in exact)
    assert (doc["base"]["starts"], doc["base"]["repetitions"]) == (1, 2)
    assert doc["base"]["problems"] == [] and doc["new"]["problems"] == []
    assert all(r["state"] == NO_CHANGE for r in doc["isolation"])
    assert {r["metric"] for r in doc["rows"]} >= {"p99_ttft_ms", "hit_rate", "leaked_tokens"}
    md = (tmp_path / "cmp" / COMPARE_MD).read_text()
    assert "CANNOT JUDGE" in md and "base: 1 run(s) (server starts), 2 repetition(s)" in md
    doc = _judged("base", "same", inconclusive="report")
    assert doc["exit_code"] == 0 and doc["summary"]["cannot judge"] == 0


def test_a_set_of_starts_against_one_slower_start_says_how_many_starts(tmp_path: Path) -> None:
    """The base set's two starts show the start-to-start spread: against one start under
    CPU load (TTFT +70%) the gate cannot decide, and says about how many starts per side
    would at that spread."""
    doc = _judged(run_set(tmp_path, "base-set", "base", "same"), "slow")
    assert doc["exit_code"] == 2 and doc["summary"]["gate failures"] == 0
    assert (doc["base"]["starts"], doc["base"]["repetitions"], doc["new"]["starts"]) == (2, 4, 1)
    [row] = [r for r in doc["rows"] if (r["path"], r["modality"], r["salt_mode"], r["metric"])
             == ("chat", "mixed", "salted", "mean_ttft_ms")]
    assert row["state"] == INCONCLUSIVE and row["change"] > 0.4
    assert "2 vs 1 server start(s): one server start on the new side" in row["reason"]
    k = int(row["reason"].split("about ")[1].split(" runs (server starts) per side")[0])
    assert 2 <= k <= 20 and "the base side’s start-to-start spread" in row["reason"]


def test_sets_of_starts_of_the_same_build(tmp_path: Path) -> None:
    """Two sets of the same two starts: intervals over 2 vs 2 starts, centred on no change;
    none regressed; what they cannot clear is underpowered, in server starts."""
    base = run_set(tmp_path, "base-set", "base", "same")
    doc = _judged(base, run_set(tmp_path, "new-set", "base", "same"))
    assert doc["exit_code"] == 2 and not any(r["state"] == REGRESSED for r in doc["rows"])
    assert doc["base"]["run_dirs"] == [str(base / "1"), str(base / "2")]
    assert len(set(doc["base"]["run_ids"])) == 2 and doc["new"]["starts"] == 2
    judged = [r for r in doc["rows"] if r["low"] is not None and r["low"] != r["high"]]
    assert judged and all(r["n_base"] == r["n_new"] == 2 and abs(r["change"]) < 1e-9
                          for r in judged)
    assert any(r["state"] == NO_CHANGE for r in judged)
    assert all("underpowered with 2 vs 2 server starts" in r["reason"]
               for r in judged if r["state"] == INCONCLUSIVE)


def test_thresholds_decide_what_is_gated(tmp_path: Path) -> None:
    gate = tmp_path / "gate.toml"
    names = ["mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
             "p99_tpot_ms", "mean_itl_ms", "mean_e2el_ms", "p99_e2el_ms", "request_throughput",
             "output_throughput", "hit_rate"]
    gate.write_text("[metrics]\n" + "".join(f'{n} = "off"\n' for n in names))
    code, doc = _compare(tmp_path, "base", "slow", "--thresholds", str(gate))
    assert code == 0 and doc["summary"]["gate failures"] == 0
    assert any(r["state"] == INCONCLUSIVE and not r["gated"] for r in doc["rows"])
    assert not any(r["state"] == INCONCLUSIVE and r["gated"] for r in doc["rows"])


def test_a_dropped_salt_loses_isolation_and_fails(tmp_path: Path) -> None:
    code, doc = _compare(tmp_path, "base", "leak")
    assert code == 1
    lost = {(r["path"], r["modality"]) for r in doc["isolation"] if r["state"] == REGRESSED}
    assert lost == {("generate-parts", m) for m in ("text", "image", "audio", "video")}
    assert {r["new"] for r in doc["isolation"] if r["path"] == "chat"} == {ISOLATED}
    assert {r["new"] for r in doc["isolation"] if r["path"] == "generate-parts"} == {LEAK}
    leaks = {(r["path"], r["salt_mode"]) for r in doc["rows"]
             if r["metric"] == "leaked_tokens" and r["state"] == REGRESSED}
    assert ("generate-parts", "salted") in leaks and ("chat", "salted") not in leaks
    assert any("leaked" in p for p in doc["new"]["problems"]) and not doc["base"]["problems"]


def test_isolation_report_only_does_not_fail_the_gate(tmp_path: Path) -> None:
    gate = tmp_path / "gate.toml"
    gate.write_text('isolation = "report"\n[metrics]\nleaked_tokens = "off"\n')
    code, doc = _compare(tmp_path, "base", "leak", "--thresholds", str(gate),
                         "--allow-inconclusive")
    assert doc["summary"]["isolation lost"] == 4
    assert all(not r["gated"] for r in doc["isolation"])
    # The lost cells fail nothing; the leaked requests of the new run still do (a problem).
    [problem] = doc["new"]["problems"]
    assert "1536 tokens leaked" in problem
    assert doc["summary"]["gate failures"] == 1 and code == 1


def _edited(tmp_path: Path, **target: object) -> Path:
    copy = tmp_path / "edited"
    shutil.copytree(FIXTURES / "same", copy, dirs_exist_ok=True)
    results = json.loads((copy / RESULTS_FILE).read_text())
    results["metadata"]["target"].update(target)
    (copy / RESULTS_FILE).write_text(json.dumps(results))
    return copy


def test_incomparable_runs_are_refused_naming_the_fields(tmp_path: Path, capsys) -> None:
    new = _edited(tmp_path, block_size=64, vllm_version="0.31.0")
    code, _ = _compare(tmp_path, "base", new)
    err = capsys.readouterr().err
    assert code == 2
    assert "target.block_size" in err and "target.vllm_version" in err
    code, doc = _compare(tmp_path, "base", new, "--allow", "target.block_size",
                         "--allow", "target.vllm_version", "--allow-inconclusive")
    assert code == 0 and set(doc["allowed_differences"]) == {"target.block_size",
                                                            "target.vllm_version"}


def test_bad_input_is_exit_2_naming_it(tmp_path: Path, capsys) -> None:
    assert _compare(tmp_path, "base", tmp_path)[0] == 2
    assert str(tmp_path) in capsys.readouterr().err
    gate = tmp_path / "gate.toml"
    gate.write_text('[metrics]\np99_ttft_ms = "-10%"\n')
    assert _compare(tmp_path, "base", "same", "--thresholds", str(gate))[0] == 2
    assert "lower-is-better" in capsys.readouterr().err


def test_outputs_for_people_and_dashboards(tmp_path: Path, capsys) -> None:
    _compare(tmp_path, run_set(tmp_path, "base-set", "base", "same"), "slow")
    out = tmp_path / "cmp"
    md = (out / COMPARE_MD).read_text()
    assert md.startswith("## saltbench compare") and "CANNOT JUDGE" in md
    assert "base: 2 run(s) (server starts), 4 repetition(s)" in md
    assert "base: 2 run(s) (server starts), 4 repetition(s)" in capsys.readouterr().out
    assert "base: 2 run(s) (server starts), 4 repetition(s)" in (out / "compare.html").read_text()
    for kind in (SMALLER, BIGGER):
        entries = json.loads((out / f"dashboard-{kind}.json").read_text())
        assert entries and all({"name", "unit", "value"} <= set(e) for e in entries)
    names = [e["name"] for e in json.loads((out / f"dashboard-{BIGGER}.json").read_text())]
    assert any(n.startswith("hit_rate ") for n in names)
    assert not any(n.startswith("p99_ttft_ms") for n in names)


def _failing_half(tmp_path: Path) -> Path:
    """A copy of ``same`` in which every other measured request failed (HTTP 500), its
    results counting them as a run counts failed requests."""
    copy = _edited(tmp_path)
    lines = (copy / RECORDS_FILE).read_text().splitlines()
    failed: dict[int, int] = {}
    out = []
    for i, line in enumerate(lines):
        r = json.loads(line)
        if r.get("phase") == MEASURE and i % 2:
            r.update(ok=False, status=500, failure=Failure.HTTP_5XX, error="HTTP 500",
                     ttft_ms=None, e2el_ms=None, itl_ms=[], itl_token_ms=[],
                     cached_tokens=None, output_tokens=None)
            failed[r["pass"]] = failed.get(r["pass"], 0) + 1
        out.append(json.dumps(r))
    (copy / RECORDS_FILE).write_text("\n".join(out) + "\n")
    results = json.loads((copy / RESULTS_FILE).read_text())
    for p in results["passes"]:
        n = failed.get(p["index"], 0)
        p.update(failed=n, completed=p["completed"] - n, failures={Failure.HTTP_5XX: n})
    (copy / RESULTS_FILE).write_text(json.dumps(results))
    return copy


def test_failed_requests_in_the_new_run_fail_the_comparison(tmp_path: Path) -> None:
    """Issue 28 (3): a candidate failing half its requests passed if its latencies held."""
    failing = _failing_half(tmp_path)
    code, doc = _compare(tmp_path, "base", failing)
    assert code == 1
    [problem] = doc["new"]["problems"]
    assert "measured request(s) failed" in problem and "http-5xx" in problem
    assert doc["summary"]["new run problems"] == 1 and doc["summary"]["gate failures"] >= 1
    md = (tmp_path / "cmp" / COMPARE_MD).read_text()
    assert "Problems in the runs" in md and problem in md
    assert "Problems in the runs" in (tmp_path / "cmp" / "compare.html").read_text()


def test_problems_in_the_base_run_mean_it_cannot_be_judged(tmp_path: Path) -> None:
    doc = _judged(_failing_half(tmp_path), "same")
    assert doc["exit_code"] == 2 and doc["summary"]["base run problems"] == 1
    assert doc["summary"]["gate failures"] == 0
    assert _judged(_failing_half(tmp_path), "same", inconclusive="report")["exit_code"] == 2


def test_a_cell_the_new_server_cannot_serve_is_not_available(tmp_path: Path) -> None:
    """Issue 28 (5): an ``n/a`` cell (route not mounted) counted as isolation lost."""
    copy = _edited(tmp_path)
    iso = json.loads((copy / ISOLATION_FILE).read_text())
    for cell in iso["cells"]:
        if cell["path"] == "generate-parts":
            cell.update(verdict=NOT_AVAILABLE, reason="/inference/v1/generate is not mounted",
                        steps=[])
    (copy / ISOLATION_FILE).write_text(json.dumps(iso))
    doc = _judged("base", copy)
    cells = {(r["path"], r["modality"]): r for r in doc["isolation"]}
    parts = [r for key, r in cells.items() if key[0] == "generate-parts"]
    assert len(parts) == 4 and all(r["state"] == NOT_AVAILABLE for r in parts)
    assert all("not mounted" in r["reason"] for r in parts)
    assert doc["summary"]["isolation lost"] == 0 and doc["summary"]["gate failures"] == 0
    assert _judged("base", copy, inconclusive="report")["exit_code"] == 0


def test_an_isolation_experiment_missing_in_the_new_run_cannot_be_judged(tmp_path: Path) -> None:
    copy = _edited(tmp_path)
    (copy / ISOLATION_FILE).unlink()
    doc = _judged("base", copy)
    assert doc["exit_code"] == 2
    assert doc["isolation"] and all(r["state"] == INCONCLUSIVE and r["gated"]
                                    for r in doc["isolation"])


def _isolation_edited(tmp_path: Path, verdicts: dict[str, str], run: str = "same",
                      name: str | None = None) -> Path:
    """A copy of ``run`` (named ``name``) whose chat cells have the given verdicts (by
    modality)."""
    copy = tmp_path / (name or f"iso-{run}")
    shutil.copytree(FIXTURES / run, copy)
    iso = json.loads((copy / ISOLATION_FILE).read_text())
    for cell in iso["cells"]:
        if cell["path"] == "chat" and cell["modality"] in verdicts:
            cell.update(verdict=verdicts[cell["modality"]], reason="edited for the test")
    (copy / ISOLATION_FILE).write_text(json.dumps(iso))
    return copy


def test_a_failing_isolation_cell_of_the_new_run_fails_even_if_the_base_failed(
        tmp_path: Path) -> None:
    """The CI recipe lets ``isolation``'s exit 1 through for ``compare`` to judge: an
    under-hit the base run had too still fails; a probe that failed (ERROR) is inconclusive."""
    base = _isolation_edited(tmp_path, {"text": UNDER_HIT, "image": ISOLATED}, "base")
    new = _isolation_edited(tmp_path, {"text": UNDER_HIT, "image": ERROR})
    doc = _judged(base, new)
    cells = {(r["path"], r["modality"]): r for r in doc["isolation"]}
    assert cells["chat", "text"]["state"] == REGRESSED
    assert "as in the base run" in cells["chat", "text"]["reason"]
    assert cells["chat", "image"]["state"] == INCONCLUSIVE
    assert doc["exit_code"] == 1


def test_a_uuid_probe_leak_in_the_new_run_fails(tmp_path: Path) -> None:
    copy = _edited(tmp_path)
    iso = json.loads((copy / ISOLATION_FILE).read_text())
    iso["uuid_probe"] = [{"path": "chat", "verdict": LEAK, "leaked_tokens": 544,
                          "reason": "cross-salt: 544 cached tokens", "steps": {}}]
    (copy / ISOLATION_FILE).write_text(json.dumps(iso))
    doc = _judged("base", copy)
    [row] = [r for r in doc["isolation"] if r["modality"] == "image uuid probe"]
    assert row["state"] == REGRESSED and doc["exit_code"] == 1


def test_runs_of_a_set_that_differ_are_refused_naming_the_field(tmp_path: Path, capsys) -> None:
    """Within a side no difference is allowed (not even with --allow): the set's directory,
    the run and the field are named; exit 2."""
    odd = _edited(tmp_path, block_size=64)
    new = run_set(tmp_path, "new-set", "same", odd)
    code, _ = _compare(tmp_path, "base", new, "--allow", "target.block_size")
    err = capsys.readouterr().err
    assert code == 2 and str(new) in err and "target.block_size" in err
    assert "the runs of a set must measure the same thing" in err and str(new / "2") in err


def test_a_side_that_is_neither_a_run_nor_a_set_is_refused(tmp_path: Path, capsys) -> None:
    bad = run_set(tmp_path, "bad-set", "same", "base")
    (bad / "notes").mkdir()
    assert _compare(tmp_path, "base", bad)[0] == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "notes has no results.json" in err
    twice = run_set(tmp_path, "twice", "same")
    shutil.copytree(twice / "1", twice / "2")
    assert _compare(tmp_path, "base", twice)[0] == 2
    assert "are the same run" in capsys.readouterr().err


def test_problems_in_one_run_of_the_new_set_fail_naming_it(tmp_path: Path) -> None:
    failing = _failing_half(tmp_path)
    new = run_set(tmp_path, "new-set", "same", failing)
    doc = _judged(run_set(tmp_path, "base-set", "base", "same"), new)
    assert doc["exit_code"] == 1 and doc["summary"]["new run problems"] == 1
    [problem] = doc["new"]["problems"]
    assert problem.startswith(f"{new / '2'}: ") and "measured request(s) failed" in problem
    assert [r["problems"] != [] for r in doc["new"]["runs"]] == [False, True]
    base = _judged(new, run_set(tmp_path, "other", "base", "same"))
    assert base["exit_code"] == 2 and base["base"]["problems"] == [problem]


def test_the_worst_isolation_verdict_of_a_set_is_judged(tmp_path: Path) -> None:
    """One run of the new set leaks on chat/text, another's probe failed on chat/image:
    the leak fails the gate (naming the run), the error is inconclusive, and the base
    set's isolated cells stay isolated."""
    erred = _isolation_edited(tmp_path, {"image": ERROR}, name="erred")
    leaked = _isolation_edited(tmp_path, {"text": LEAK}, name="leaked")
    iso = json.loads((leaked / ISOLATION_FILE).read_text())
    for cell in iso["cells"]:
        if (cell["path"], cell["modality"]) == ("chat", "text"):
            cell["leaked_tokens"] = 288
    (leaked / ISOLATION_FILE).write_text(json.dumps(iso))
    new = run_set(tmp_path, "new-set", erred, leaked, "same")
    doc = _judged(run_set(tmp_path, "base-set", "base", "same"), new)
    cells = {(r["path"], r["modality"]): r for r in doc["isolation"]}
    assert cells["chat", "text"]["state"] == REGRESSED and cells["chat", "text"]["new"] == LEAK
    assert cells["chat", "text"]["reason"].startswith("2: ")
    assert cells["chat", "image"]["state"] == INCONCLUSIVE
    assert cells["chat", "audio"]["state"] == NO_CHANGE
    assert doc["exit_code"] == 1 and doc["summary"]["isolation lost"] == 1


def _with_objectives(tmp_path: Path, run: str, slos: dict[str, float] | None) -> Path:
    """A copy of fixture ``run`` as if run with ``--goodput``: its results rebuilt from its
    own records under ``slos`` (real requests counted against them)."""
    copy = tmp_path / f"{run}-{'-'.join(f'{k}{v:g}' for k, v in (slos or {}).items())}"
    shutil.copytree(FIXTURES / run, copy)
    metadata = json.loads((copy / RESULTS_FILE).read_text())["metadata"]
    rebuild_results(copy, {**metadata, "options": {**metadata["options"], "goodput": slos}})
    return copy


def test_goodput_is_compared_only_where_both_runs_have_the_same_objectives(
        tmp_path: Path, capsys) -> None:
    """Without objectives no goodput row appears (no n/a rows); with the same objectives
    request goodput and SLO attainment are compared per group, reported (no default
    threshold) and gated where a threshold is set; runs under different objectives are
    refused, naming options.goodput."""
    plain = _judged("base", "same")
    assert not {"request_goodput", "slo_attainment"} & {r["metric"] for r in plain["rows"]}

    slos = {"ttft": 60.0}
    base, same = (_with_objectives(tmp_path, run, slos) for run in ("base", "same"))
    doc = compare_runs(load_side(base), load_side(same), Thresholds(), {})
    attained = [r for r in doc["rows"] if r["metric"] == "slo_attainment"]
    assert attained and {r["metric"] for r in doc["rows"]} >= {"request_goodput"}
    assert all(r["gated"] is False for r in attained)
    assert any(0 < r["base"] < 1 for r in attained), [r["base"] for r in attained]

    gated = Thresholds()
    gated.metrics["slo_attainment"] = 5.0
    doc = compare_runs(load_side(base), load_side(same), gated, {})
    assert all(r["gated"] for r in doc["rows"] if r["metric"] == "slo_attainment")

    other = _with_objectives(tmp_path, "same", {"ttft": 120.0})
    code = main(["compare", str(base), str(other), "--out", str(tmp_path / "refused")])
    assert code == 2 and "options.goodput" in capsys.readouterr().err
