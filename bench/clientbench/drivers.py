"""saltbench's own client and the loopback ceiling as :class:`bench.peers.base.Driver`\\ s,
so that clientbench runs them exactly as it runs the peers (own process, CPU and RSS)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.outputs import RESULTS_FILE
from bench.peers.base import Driver, PeerRun, ToolMetrics
from bench.results import read_results
from bench.vocab import CHAT_ROUTE

ROOT = Path(__file__).resolve().parents[2]
RESULT = "loopback.json"


class Saltbench(Driver):
    """``run_bench.py run`` on the clientbench workload: the chat path, no salt, no warm-up.

    Its metrics are those of the measured pass in ``results.json`` (vLLM's definitions); its
    CPU time and memory include what follows the pass (renders and results).
    """

    name = "saltbench"

    def __init__(self, workload: Path, workers: int = 1) -> None:
        from bench import __version__
        super().__init__([sys.executable, str(ROOT / "run_bench.py"), "run"], __version__)
        self.workload, self.workers = workload, workers

    def command(self, run: PeerRun, workdir: Path, tokenizer: Path) -> list[str]:
        rate = [] if run.rate is None else ["--rate", str(run.rate), "--burstiness", "1"]
        return [*self.prefix, "--server-url", run.base_url, "--model", run.model,
                "--spec", str(self.workload), "--paths", "chat", "--salt-modes", "none",
                "--warmup", "0", "--max-concurrency", str(run.concurrency), *rate,
                "--workers", str(self.workers), "--out", str(workdir / "run")]

    def parse(self, workdir: Path) -> ToolMetrics:
        (p,) = read_results(workdir / "run" / RESULTS_FILE)["passes"]
        return ToolMetrics(p["completed"], p["failed"], p["duration_s"], p["request_throughput"],
                           p["median_ttft_ms"], p["p99_ttft_ms"], p["median_itl_ms"],
                           p["p99_itl_ms"])


class Loopback(Driver):
    """:mod:`bench.clientbench.loopback`: the least a streaming client can do."""

    name = "loopback"
    supports_rate = False

    def __init__(self) -> None:
        from bench import __version__
        super().__init__([sys.executable, "-m", "bench.clientbench.loopback"], __version__)

    def command(self, run: PeerRun, workdir: Path, tokenizer: Path) -> list[str]:
        bodies = workdir / "bodies.jsonl"
        with open(bodies, "w") as fh:
            for p in run.prompts:
                fh.write(json.dumps({
                    "model": run.model, "messages": [{"role": "user", "content": p.content()}],
                    "max_tokens": run.output_tokens, **run.sampling(), "stream": True,
                    "stream_options": {"include_usage": True}}) + "\n")
        return [*self.prefix, "--url", f"{run.base_url}{CHAT_ROUTE}", "--bodies", str(bodies),
                "--concurrency", str(run.concurrency), "--requests", str(run.requests),
                "--out", str(workdir / RESULT)]

    def parse(self, workdir: Path) -> ToolMetrics:
        return ToolMetrics(**json.loads((workdir / RESULT).read_text()))
