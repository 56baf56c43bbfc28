"""The demo, the project's main job, end to end against the session's server: its tables,
exit code and report files (small workload, few side-channel samples)."""

from __future__ import annotations

import json
from pathlib import Path

from cliproc import saltbench_process

from bench.engine.target import Target


def test_demo_end_to_end(target: Target, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    with saltbench_process("demo", "--server-url", target.base_url, "--requests", "4",
                           "--samples", "2", "--out", str(out)) as proc:
        stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    for title in ("cache_salt on the chat path", "Per pass (measure phase)",
                  "Isolation verdicts", "Media UUID probe", "Timing side channel"):
        assert title in stdout, title
    assert "requests judged exactly" in stdout and "Cache judgements per request" in stdout
    assert "report:" in stderr and str(out / "index.html") in stderr
    results = json.loads((out / "results.json").read_text())
    assert len(results["passes"]) == 8 and not results["interrupted"]
    assert all(p["completed"] == 4 and p["failed"] == 0 for p in results["passes"])
    isolation = json.loads((out / "isolation.json").read_text())
    assert isolation["complete"] and {c["verdict"] for c in isolation["cells"]} == {"ISOLATED"}
    # The demo shows the media caches crossing tenants and fails only on a KV leak.
    assert isolation["metadata"]["isolation_options"]["fail_on"] == ["kv-cache"]
    assert "SUBSTITUTED" in {r["media-content"] for r in isolation["boundary"]}
    assert isolation["exit_code"] == 0 and "Tenant boundary" in stdout
    assert "- Media content: a tenant that sends an item with another tenant's" in stdout
    assert (out / "records.jsonl").stat().st_size > 0
    html = (out / "index.html").read_text()
    assert "Isolation verdicts" in html and "<img" in html
    summary = (out / "summary.md").read_text()
    assert "| chat | none |" in summary and "requests judged exactly" in summary
    assert "| generate-parts | image | ISOLATED |" in summary
    charts = {p.name for p in (out / "charts").iterdir()}
    assert {p for p in charts if p.endswith(".png")} and {p for p in charts if p.endswith(".svg")}
