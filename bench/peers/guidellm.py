"""GuideLLM (``guidellm run``), openai_http backend on ``/v1/chat/completions``, streaming.

Prompts are a ``json_file`` dataset: ``{"prompt", "output_tokens_count", "image"}`` rows.
GuideLLM sends ``max_completion_tokens`` from ``output_tokens_count`` with ``ignore_eos``;
``min_tokens`` goes in the backend's extra body. The image is given already encoded
(``{"type": "image_url", "image": data URL}``), which GuideLLM sends as it is: a bare data URL
would be decoded and re-encoded as JPEG, and needs Pillow, which guidellm does not install.
Per-request samples are left out of its JSON (``sample_size=0``). Requests completed and
failed are its scheduler's counts: its latency statistics can leave out a few requests.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.peers.base import Driver, PeerRun, ToolMetrics

RESULT = "guidellm.json"


class GuideLLM(Driver):
    name = "guidellm"
    subcommand = ("run",)

    def command(self, run: PeerRun, workdir: Path, tokenizer: Path) -> list[str]:
        dataset = workdir / "prompts.jsonl"
        with open(dataset, "w") as fh:
            for p in run.cycled():
                row: dict = {"prompt": p.text, "output_tokens_count": run.output_tokens}
                if p.image_url:
                    row["image"] = {"type": "image_url", "image": p.image_url}
                fh.write(json.dumps(row) + "\n")
        if run.rate is None:
            profile = f"kind=concurrent,streams={run.concurrency}"
        else:
            profile = f"kind=poisson,rate={run.rate},max_concurrency={run.concurrency}"
        return [*self.prefix,
                "--backend", f"kind=openai_http,target={run.base_url},model={run.model},"
                             f"extras.body.min_tokens={run.output_tokens}",
                "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
                "--data", f"kind=json_file,path={dataset}",
                "--profile", profile,
                "--constraint", f"kind=max_requests,count={run.requests}",
                "--seed", "kind=static,value=0",
                "--metrics", "kind=generative,sample_size=0",
                "--output", f"kind=json,path={workdir / RESULT}",
                "--disable-console-interactive"]

    def parse(self, workdir: Path) -> ToolMetrics:
        b = json.loads((workdir / RESULT).read_text())["benchmarks"][0]
        m, s = b["metrics"], b["scheduler_state"]
        ttft = m["time_to_first_token_ms"]["successful"]["percentiles"]
        itl = m["inter_token_latency_ms"]["successful"]["percentiles"]
        return ToolMetrics(
            completed=s["successful_requests"],
            failed=s["errored_requests"] + s["cancelled_requests"],
            duration_s=b["duration"],
            request_throughput=m["requests_per_second"]["successful"]["mean"],
            ttft_p50_ms=ttft["p50"], ttft_p99_ms=ttft["p99"],
            itl_p50_ms=itl["p50"], itl_p99_ms=itl["p99"])
