import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cliproc import saltbench_process
from PIL import Image

from bench.cli import main
from bench.errors import BenchError
from bench.report.build import build_report
from bench.results import read_results
from bench.run.secret import SECRET_FILE, read_secret
from bench.salts import derive
from bench.workload import open_workload
from bench.zerowork.process import ZeroWorkServer

BASE_CHARTS = ("hit-rate", "ttft-cdf", "ttft-groups", "throughput")
ISOLATION_CHARTS = ("isolation", "side-channel")


def check_charts(report: Path, names: tuple[str, ...]) -> None:
    for name in names:
        with Image.open(report / "charts" / f"{name}.png") as img:
            img.verify()
        root = ET.parse(report / "charts" / f"{name}.svg").getroot()
        assert root.tag.endswith("svg")
    html = (report / "index.html").read_text()
    assert html.count("data:image/png;base64,") == len(names)
    for name in names:
        assert f'id="chart-{name}"' in html


def test_report_from_real_run(fixture_run, tmp_path):
    results = json.loads((fixture_run / "results.json").read_text())
    report = build_report([fixture_run], tmp_path / "rep")
    check_charts(report, BASE_CHARTS + ISOLATION_CHARTS)  # the fixture has a real isolation.json
    html = (report / "index.html").read_text()
    for title in ("Metadata", "Per pass (measure phase)", "Per path, modality and salt mode"):
        assert f"<h3>{title}" in html
    counts = results["judgements"]["counts"]
    assert f"requests judged exactly: {counts['judged']} of {counts['requests']}" in html
    assert "<h3>Cache judgements per request" in html
    md = (report / "summary.md").read_text()
    meta = results["metadata"]
    for text in (meta["target"]["vllm_version"], meta["workload"]["spec"]["sha256"]):
        assert text in html and text in md
    assert "| path | salt mode |" in md
    for p in results["passes"]:
        assert f"| {p['path']} | {p['salt_mode']} | {p['completed']}/{p['failed']} |" in md
    iso = json.loads((fixture_run / "isolation.json").read_text())
    assert "<h3>Isolation verdicts" in html
    for cell in iso["cells"]:
        assert f"| {cell['path']} | {cell['modality']} | {cell['verdict']} |" in md


def test_report_without_isolation(fixture_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(fixture_run, run)
    (run / "isolation.json").unlink()
    report = build_report([run], tmp_path / "rep")
    check_charts(report, BASE_CHARTS)
    assert not (report / "charts" / "isolation.png").exists()
    html, md = (report / "index.html").read_text(), (report / "summary.md").read_text()
    assert "Isolation verdicts" not in html and "verdict" not in md


def test_report_with_isolation(isolated_run, tmp_path):
    report = build_report([isolated_run / "results.json"], tmp_path / "rep")
    check_charts(report, BASE_CHARTS + ISOLATION_CHARTS)
    html = (report / "index.html").read_text()
    for title in ("Isolation verdicts", "Timing side channel", "Media UUID probe"):
        assert f"<h3>{title}" in html
    md = (report / "summary.md").read_text()
    assert "| chat | audio | LEAK |  | 64 |" in md
    assert "synthetic \\| test" in md  # pipes in cells are escaped


def test_two_runs_side_by_side(fixture_run, isolated_run, tmp_path):
    report = build_report([fixture_run, isolated_run], tmp_path / "rep",
                          labels=["baseline", "patched"])
    check_charts(report, BASE_CHARTS + ISOLATION_CHARTS)
    md = (report / "summary.md").read_text()
    assert "### baseline" in md and "### patched" in md


def test_no_raw_salts(tmp_path):
    """The raw salts a run sent (derived from its secret) are in none of its files, its
    report's files or its logs (debug logging on); nor is the secret."""
    out, rep = tmp_path / "run", tmp_path / "rep"
    logs = []
    with ZeroWorkServer() as server:
        for args in (["run", "--server-url", server.url, "--spec", "smoke", "--requests", "12",
                      "--out", str(out)], ["report", str(out), "--out", str(rep)]):
            with saltbench_process("--verbose", *args) as proc:
                logs += proc.communicate(timeout=300)
            assert proc.returncode == 0, logs[-1]
    secret = read_secret(out)
    workload = open_workload(read_results(out / "results.json")["metadata"]["workload"]["dir"])
    refs = {r["salt_ref"] for r in workload.requests() if r["salt_ref"]}
    needles = {secret: "the run secret", **{derive(secret, ref): f"the raw salt of {ref}"
                                            for ref in refs}}
    assert len(needles) > 2
    files = [p for p in [*out.rglob("*"), *rep.rglob("*")]
             if p.is_file() and p.name != SECRET_FILE]
    assert {"records.jsonl", "results.json", "index.html", "summary.md"} <= {p.name for p in files}
    texts = {str(p): p.read_bytes().decode(errors="replace") for p in files}
    texts.update({f"log {i}": text for i, text in enumerate(logs)})
    assert any("salt_digest" in text for text in texts.values())  # the salted passes ran
    found = [(where, what) for where, text in texts.items() for needle, what in needles.items()
             if needle in text]
    assert not found


def test_cli_report(fixture_run, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["report", str(fixture_run), "--out", str(out), "--label", "smoke"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert (out / "index.html").exists() and (out / "summary.md").exists()


@pytest.mark.parametrize("content, message", [
    (None, "results.json"), ("{not json", "results.json"),
    ('{"kind": "other"}', "not a saltbench-run file")])
def test_bad_results_name_the_file(tmp_path, content, message):
    if content is not None:
        (tmp_path / "results.json").write_text(content)
    with pytest.raises(BenchError, match=message):
        build_report([tmp_path], tmp_path / "rep")


def test_bad_isolation_names_the_file(isolated_run, tmp_path):
    (isolated_run / "isolation.json").write_text('{"kind": "saltbench-isolation"}')
    with pytest.raises(BenchError, match="isolation.json"):
        build_report([isolated_run], tmp_path / "rep")


def test_label_count_must_match(fixture_run, tmp_path):
    with pytest.raises(BenchError, match="labels"):
        build_report([fixture_run], tmp_path / "rep", labels=["a", "b"])


def test_run_without_passes_is_refused(isolated_run, tmp_path):
    results = json.loads((isolated_run / "results.json").read_text())
    (isolated_run / "results.json").write_text(json.dumps({**results, "passes": []}))
    with pytest.raises(BenchError, match="results.json: no passes"):
        build_report([isolated_run], tmp_path / "rep")


def test_cli_report_defaults_to_the_run_directory(fixture_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(fixture_run, run)
    assert main(["report", str(run / "results.json")]) == 0
    assert capsys.readouterr().out.strip() == str(run)
    assert (run / "index.html").exists() and (run / "charts" / "hit-rate.png").exists()
