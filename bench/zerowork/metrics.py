"""vLLM's request and cache counters, kept in step with what each request reports."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

_HELP = {
    "prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "mm_cache_queries": "Multi-modal cache queries, in terms of number of queried items.",
    "mm_cache_hits": "Multi-modal cache hits, in terms of number of cached items.",
    "prompt_tokens": "Number of prefill tokens processed.",
    "prompt_tokens_cached": "Number of cached prompt tokens (local + external).",
    "generation_tokens": "Number of generation tokens processed.",
}


@dataclass
class Counters:
    """Totals since the server started (engine 0); rendered as Prometheus text."""

    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    mm_cache_queries: int = 0
    mm_cache_hits: int = 0
    prompt_tokens: int = 0
    prompt_tokens_cached: int = 0
    generation_tokens: int = 0
    request_success: int = 0
    #: As prometheus_client's process collector reports it: a restart changes it.
    started: float = field(default_factory=time.time)

    def admitted(self, prompt_tokens: int, cached_tokens: int) -> None:
        """A request was scheduled: its prompt was looked up in the prefix cache."""
        self.prefix_cache_queries += prompt_tokens
        self.prefix_cache_hits += cached_tokens
        self.prompt_tokens += prompt_tokens
        self.prompt_tokens_cached += cached_tokens

    def finished(self, output_tokens: int) -> None:
        """A request finished (by length: every request ignores EOS here)."""
        self.generation_tokens += output_tokens
        self.request_success += 1

    def exposition(self, model: str) -> str:
        """The counters as ``prometheus_client`` writes vLLM's."""
        labels = f'engine="0",model_name={json.dumps(model)}'
        lines = []
        for name, text in _HELP.items():
            lines += [f"# HELP vllm:{name}_total {text}", f"# TYPE vllm:{name}_total counter",
                      f"vllm:{name}_total{{{labels}}} {float(getattr(self, name))}"]
        computed = self.prompt_tokens - self.prompt_tokens_cached
        lines += ["# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.",
                  "# TYPE vllm:prompt_tokens_by_source_total counter"]
        for source, value in (("local_compute", computed),
                              ("local_cache_hit", self.prompt_tokens_cached),
                              ("external_kv_transfer", 0)):
            lines.append(f'vllm:prompt_tokens_by_source_total{{{labels},source="{source}"}} '
                         f"{float(value)}")
        lines += ["# HELP vllm:request_success_total Count of successfully processed requests.",
                  "# TYPE vllm:request_success_total counter"]
        for reason in ("stop", "length", "abort", "error"):
            value = self.request_success if reason == "length" else 0
            lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} '
                         f"{float(value)}")
        lines += ["# HELP process_start_time_seconds Start time of the process since unix epoch "
                  "in seconds.", "# TYPE process_start_time_seconds gauge",
                  f"process_start_time_seconds {self.started}"]
        return "\n".join(lines) + "\n"
