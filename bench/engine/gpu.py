"""The NVIDIA GPUs of the machine that runs managed servers: what they are (recorded with
every result, checked by ``compare``) and which of them each replica gets.

Read with ``nvidia-smi``: saltbench's own environment has no CUDA library. A server given
by URL may run elsewhere, so its GPUs are not read from the client's machine.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError

#: What ``nvidia-smi --query-gpu`` is asked, in this order.
QUERY = ("index", "name", "memory.total", "driver_version")
#: vLLM's default share of a GPU's memory for one server.
DEFAULT_UTILIZATION = 0.9


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int
    driver: str


def parse_query(text: str) -> list[Gpu]:
    """``nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits`` as GPUs; a
    BenchError quoting a line it cannot read."""
    gpus = []
    for line in filter(None, (x.strip() for x in text.splitlines())):
        parts = [p.strip() for p in line.split(",")]
        try:
            index, name, memory, driver = parts
            gpus.append(Gpu(int(index), name, int(float(memory)), driver))
        except ValueError:
            raise BenchError(f"nvidia-smi: cannot read {line!r} (expected "
                             f"{', '.join(QUERY)})") from None
    return gpus


def local_gpus() -> list[Gpu]:
    """This machine's NVIDIA GPUs (none without ``nvidia-smi``)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    proc = subprocess.run([smi, f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise BenchError(f"nvidia-smi failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return parse_query(proc.stdout)


def torch_cuda(python: Path) -> str | None:
    """The CUDA version the engine's torch was built for (None: a CPU build)."""
    proc = subprocess.run([str(python), "-c", "import torch; print(torch.version.cuda)"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise BenchError(f"{python}: cannot import torch: {proc.stderr.strip()[-500:]}")
    found = proc.stdout.strip().splitlines()[-1]
    return None if found == "None" else found


def gpu_metadata(gpus: list[Gpu], python: Path, torch: str | None) -> dict:
    """What a result records about the GPUs of a managed server's machine and the engine
    that used them (``torch``: its version, as provisioned)."""
    return {"count": len(gpus), "names": sorted({g.name for g in gpus}),
            "memory_mib": sorted({g.memory_mib for g in gpus}),
            "driver": sorted({g.driver for g in gpus}), "cuda": torch_cuda(python),
            "torch": torch}


@dataclass(frozen=True)
class Placement:
    """Where one replica runs: ``CUDA_VISIBLE_DEVICES`` and, when it shares its GPU, its
    share of the GPU's memory (``--gpu-memory-utilization``)."""

    devices: str
    memory_share: float | None = None


def place_replicas(n: int, gpus: list[Gpu], tensor_parallel: int = 1,
                   utilization: float = DEFAULT_UTILIZATION) -> list[Placement]:
    """``n`` replicas on ``gpus``: each its own ``tensor_parallel`` GPUs where there are
    enough; else (no tensor parallelism) replicas share GPUs round robin, each with an
    equal part of ``utilization``; a BenchError when they cannot fit."""
    if not gpus:
        raise BenchError("replicas of a CUDA engine need a GPU; nvidia-smi lists none")
    if n * tensor_parallel <= len(gpus):
        return [Placement(",".join(str(g.index) for g in gpus[i * tensor_parallel:
                                                                (i + 1) * tensor_parallel]))
                for i in range(n)]
    if tensor_parallel > 1:
        raise BenchError(f"{n} replicas with tensor parallel size {tensor_parallel} need "
                         f"{n * tensor_parallel} GPUs; this machine has {len(gpus)}")
    shared = [sum(1 for j in range(n) if j % len(gpus) == i % len(gpus)) for i in range(n)]
    return [Placement(str(gpus[i % len(gpus)].index),
                      round(int(100 * utilization / k) / 100, 2))
            for i, k in enumerate(shared)]
