"""inference-perf (``inference-perf``), chat API, streaming, ``vllm`` server type.

Its one custom-prompt dataset is ShareGPT from a local file: ``{"conversations": [human,
gpt]}`` rows, at least two turns each, every turn sent as a message. So each request carries
the prompt as its user message (a list of parts with the image data URL for image prompts)
and an empty assistant message after it. It does not send a chat ``max_tokens`` of its own
choosing for ShareGPT (always 30) and has no ``min_tokens``: run the server with a fixed
output length (zero-work ``--output-tokens``) to compare equal replies. Rate runs are a
Poisson stage of ``ceil(requests / rate)`` seconds: it paces by time, not by count.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.peers.base import Driver, PeerRun, ToolMetrics

REPORTS = "inference-perf-reports"
SUMMARY = "summary_lifecycle_metrics.json"


class InferencePerf(Driver):
    name = "inference-perf"

    def command(self, run: PeerRun, workdir: Path, tokenizer: Path) -> list[str]:
        dataset = workdir / "prompts.json"  # JSON lines; the loader wants this suffix
        with open(dataset, "w") as fh:
            for p in run.cycled():
                turns = [{"from": "human", "value": p.content()}, {"from": "gpt", "value": ""}]
                fh.write(json.dumps({"conversations": turns}) + "\n")
        if run.rate is None:
            load = ["--load.type", "concurrent", "--load.stages", json.dumps(
                [{"num_requests": run.requests, "concurrency_level": run.concurrency}])]
        else:
            load = ["--load.type", "poisson", "--load.stages", json.dumps(
                [{"rate": run.rate, "duration": math.ceil(run.requests / run.rate)}])]
        return [*self.prefix,
                "--server.type", "vllm", "--server.base_url", run.base_url,
                "--server.model_name", run.model, "--server.ignore_eos", "true",
                "--api.type", "chat", "--api.streaming", "true",
                "--data.type", "shareGPT", "--data.path", str(dataset),
                "--tokenizer.pretrained_model_name_or_path", str(tokenizer),
                *load, "--load.base_seed", "0",
                "--report.request_lifecycle.summary", "true",
                "--report.request_lifecycle.per_stage", "false",
                "--report.request_lifecycle.per_request", "false",
                "--storage.local_storage.path", str(workdir / REPORTS)]

    def parse(self, workdir: Path) -> ToolMetrics:
        r = json.loads((workdir / REPORTS / SUMMARY).read_text())
        ok = r["successes"]
        ttft, itl = ok["latency"]["time_to_first_token"], ok["latency"]["inter_token_latency"]
        return ToolMetrics(
            completed=ok["count"], failed=r["failures"]["count"],
            duration_s=r["benchmark_time_seconds"],
            request_throughput=ok["throughput"]["requests_per_sec"],
            ttft_p50_ms=ttft["median"] * 1e3, ttft_p99_ms=ttft["p99"] * 1e3,
            itl_p50_ms=itl["median"] * 1e3, itl_p99_ms=itl["p99"] * 1e3)
