"""AIPerf (``aiperf profile``), chat endpoint, streaming.

Prompts are its ``single_turn`` custom dataset: ``{"text", "image", "output_length"}`` lines,
the image a data URL that it sends as is in an ``image_url`` part. Server metrics, GPU
telemetry and the UI are off, and it exports the summary only.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.peers.base import Driver, PeerRun, ToolMetrics

ARTIFACTS = "aiperf-artifacts"
SUMMARY = "profile_export_aiperf.json"


class AIPerf(Driver):
    name = "aiperf"
    subcommand = ("profile",)
    #: Offline, AIPerf looks a local tokenizer path up in the hub cache and fails
    #: (HFValidationError); online it loads the directory without a request.
    offline = False

    def command(self, run: PeerRun, workdir: Path, tokenizer: Path) -> list[str]:
        dataset = workdir / "prompts.jsonl"
        with open(dataset, "w") as fh:
            for p in run.cycled():
                row = {"text": p.text, "output_length": run.output_tokens}
                if p.image_url:
                    row["image"] = p.image_url
                fh.write(json.dumps(row) + "\n")
        rate = [] if run.rate is None else ["--request-rate", str(run.rate),
                                            "--arrival-pattern", "poisson"]
        return [*self.prefix,
                "--model", run.model, "--url", run.base_url, "--endpoint-type", "chat",
                "--streaming", "--tokenizer", str(tokenizer),
                "--input-file", str(dataset), "--custom-dataset-type", "single_turn",
                "--dataset-sampling-strategy", "sequential",
                "--extra-inputs", json.dumps(run.sampling()),
                "--concurrency", str(run.concurrency), "--request-count", str(run.requests),
                *rate, "--random-seed", "0",
                "--output-artifact-dir", str(workdir / ARTIFACTS), "--export-level", "summary",
                "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry"]

    def parse(self, workdir: Path) -> ToolMetrics:
        r = json.loads((workdir / ARTIFACTS / SUMMARY).read_text())
        ttft, itl = r["time_to_first_token"], r.get("inter_token_latency", {})
        return ToolMetrics(
            completed=int(r["completed_request_count"]["avg"]),
            failed=int(r.get("error_request_count", {}).get("avg", 0)),
            duration_s=r["benchmark_duration"]["avg"],
            request_throughput=r["request_throughput"]["avg"],
            ttft_p50_ms=ttft["p50"], ttft_p99_ms=ttft["p99"],
            itl_p50_ms=itl.get("p50"), itl_p99_ms=itl.get("p99"))
