"""The findings at the top of every report: plain sentences, the failing ones first."""

import copy
import json
from pathlib import Path

from bench.report.build import build_report
from bench.report.findings import findings
from bench.report.load import load_run


def test_real_run_findings(fixture_run: Path):
    """The committed real run (written before the media-content verdict): KV isolated in 13
    cells, but the uuid probe's different image under another salt hit the multimodal cache
    on both paths that send uuids, which the default policy fails, so it leads."""
    run = load_run(fixture_run)
    found = findings(run.results, run.isolation)
    assert found[0].startswith("FAILS: Media content: a tenant that sends an item with another")
    assert found[0].endswith("on chat (image), generate-parts (image).")
    assert found[1] == "KV cache isolated by salt on every path and modality probed (13 cells)."
    assert found[2].startswith("Timing: no evidence")  # 4 samples: too few for Holm
    assert "UNDERPOWERED" in found[2]
    assert found[3].startswith("Prefix-cache hit rate without salt → salted: chat 49.3% → 41.1%")


def test_failures_and_leaks_lead(isolated_run: Path):
    run = load_run(isolated_run)
    results = copy.deepcopy(run.results)
    results["passes"][1]["failed"] = 3
    found = findings(results, run.isolation)
    assert found[0].startswith("FAILS: 3 measured request(s) failed")
    assert ("FAILS: A tenant reuses KV blocks cached under another salt on chat (audio), 64 "
            "tokens beyond the salt rules.") in found
    assert "FAILS: KV cache UNDER-HIT on generate-parts (image)." in found
    assert not any(f.startswith("KV cache isolated") for f in found)


def test_reports_start_with_findings(tmp_path: Path, isolated_run: Path):
    out = build_report([isolated_run], tmp_path / "report")
    html = (out / "index.html").read_text()
    md = (out / "summary.md").read_text()
    assert html.index("Findings") < html.index("A tenant reuses KV blocks") < html.index(
        "Metadata")
    assert md.index("- FAILS: A tenant reuses KV blocks cached under another salt on chat "
                    "(audio)") < md.index("run id **")
    iso = json.loads((isolated_run / "isolation.json").read_text())
    assert iso["cells"][1]["verdict"] == "LEAK"
