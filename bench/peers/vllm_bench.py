"""``vllm bench serve`` (openai-chat backend), run with the engine environment's Python.

Both text and image prompts are its ``custom_image`` dataset in the ``{"content": [parts]}``
form: a text part, then for image prompts an ``image_url`` part with the data URL, sent as
they are (openai-chat always sends a list of parts, so text requests are the same bytes as
with the ``custom`` dataset, which would need pandas, absent from the engine environment).
The file holds exactly the requests to send, in order.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from bench.engine import provision as engine_envs
from bench.engine.environment import EngineEnv
from bench.engine.provision import MARKER
from bench.engine.spec import default_engine_spec
from bench.peers.base import Driver, PeerRun, ToolMetrics

RESULT = "vllm-bench.json"


class VllmBench(Driver):
    name = "vllm-bench"

    @classmethod
    def on_engine(cls, env: EngineEnv) -> VllmBench:
        """The driver on an engine environment."""
        return cls([str(env.python), "-m", "vllm.entrypoints.cli.main", "bench", "serve"],
                   env.vllm_version)

    @classmethod
    def find(cls) -> VllmBench | None:
        """The driver on the default engine's environment, if it is provisioned."""
        root = engine_envs.env_dir(default_engine_spec())
        try:
            info = json.loads((root / MARKER).read_text())
        except (OSError, ValueError):
            return None
        return cls.on_engine(EngineEnv(root / "bin" / "python", info))

    @classmethod
    def provision(cls, console: Console | None = None) -> VllmBench:
        """The driver on the default engine's environment, built first if needed."""
        return cls.on_engine(engine_envs.provision(default_engine_spec(), console))

    def command(self, run: PeerRun, workdir: Path, tokenizer: Path) -> list[str]:
        dataset = workdir / "prompts.jsonl"
        with open(dataset, "w") as fh:
            for p in run.cycled():
                parts = p.content()
                fh.write(json.dumps({"content": parts if isinstance(parts, list) else
                                     [{"type": "text", "text": parts}]}) + "\n")
        return [*self.prefix,
                "--backend", "openai-chat", "--base-url", run.base_url,
                "--endpoint", "/v1/chat/completions", "--model", run.model,
                "--tokenizer", str(tokenizer),
                "--dataset-name", "custom_image", "--dataset-path", str(dataset),
                "--disable-shuffle",
                "--num-prompts", str(run.requests), "--custom-output-len", str(run.output_tokens),
                "--ignore-eos", "--extra-body", json.dumps({"min_tokens": run.output_tokens}),
                "--max-concurrency", str(run.concurrency),
                "--request-rate", "inf" if run.rate is None else str(run.rate),
                "--percentile-metrics", "ttft,itl", "--metric-percentiles", "50,99",
                "--disable-tqdm", "--save-result", "--result-dir", str(workdir),
                "--result-filename", RESULT]

    def parse(self, workdir: Path) -> ToolMetrics:
        r = json.loads((workdir / RESULT).read_text())
        return ToolMetrics(
            completed=r["completed"], failed=r["failed"], duration_s=r["duration"],
            request_throughput=r["request_throughput"],
            ttft_p50_ms=r["p50_ttft_ms"], ttft_p99_ms=r["p99_ttft_ms"],
            itl_p50_ms=r["p50_itl_ms"], itl_p99_ms=r["p99_itl_ms"])
