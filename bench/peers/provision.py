"""Peer environments: one cached virtual environment per peer benchmark client.

``provision(name)`` creates ``<cache>/peers/<name>-<version>`` with an interpreter that
meets the tool's ``Requires-Python``, installs the pinned requirements with the engine's
pip runner (streaming progress), and records versions, install time and size in
``saltbench-env.json``. A second call reuses it; ``find_env(name)`` only looks.
``vllm bench serve`` has no environment of its own: it runs in the engine's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from bench.cachedirs import cache_dir
from bench.engine.provision import MARKER, Pip, cached_env
from bench.errors import BenchError


@dataclass(frozen=True)
class PeerSpec:
    """A peer tool pinned to the release that installs here."""

    name: str
    requirements: tuple[str, ...]  # the first is the tool itself
    min_python: tuple[int, int]
    script: str  # console script in the environment's bin/

    @property
    def slug(self) -> str:
        return self.requirements[0].replace("==", "-")


#: The latest releases that install from the index on this machine (Python 3.11, torch 2.13.0+cpu
#: on disk). guidellm needs torch: pinning the CPU build on disk avoids a CUDA download.
#: inference-perf requires Python >= 3.12.
PEERS = {spec.name: spec for spec in (
    PeerSpec("aiperf", ("aiperf==0.13.0",), (3, 11), "aiperf"),
    PeerSpec("guidellm", ("guidellm==0.8.1", "torch==2.13.0"), (3, 10), "guidellm"),
    PeerSpec("inference-perf", ("inference-perf==0.7.0",), (3, 12), "inference-perf"),
)}


@dataclass(frozen=True)
class PeerEnv:
    """A provisioned peer environment."""

    root: Path
    spec: PeerSpec
    info: dict  # versions, python, provision_s, size_mb

    @property
    def executable(self) -> Path:
        return self.root / "bin" / self.spec.script


def env_dir(spec: PeerSpec) -> Path:
    return cache_dir("peers") / spec.slug


def _python_version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    parts = out.stdout.split()
    return (int(parts[0]), int(parts[1])) if out.returncode == 0 and len(parts) == 2 else None


def find_python(minimum: tuple[int, int]) -> str:
    """This interpreter if it is new enough, else the oldest python3.X on PATH or under pyenv
    that is (pyenv's shims only answer for the active version: its ``versions/`` is searched)."""
    if sys.version_info[:2] >= minimum:
        return sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = [p for p in (shutil.which(f"python3.{m}") for m in range(minimum[1], 20)) if p]
    found += sorted(str(p) for p in pyenv.glob("3.*/bin/python3"))
    usable = [(v, p) for p in found if (v := _python_version(p)) and v >= minimum]
    if not usable:
        raise BenchError(f"no Python >= {minimum[0]}.{minimum[1]} found on PATH or in {pyenv}")
    return min(usable)[1]


def _size_mb(root: Path) -> float:
    total = sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(root) for f in files)
    return round(total / 2**20, 1)


def _installed(python: Path, spec: PeerSpec) -> dict:
    """The environment's Python version and the installed versions of the requirements."""
    names = [r.split("==")[0] for r in spec.requirements]
    code = ("import importlib.metadata as m, json, platform, sys; print(json.dumps({"
            "'python': platform.python_version(), "
            "'versions': {n: m.version(n) for n in sys.argv[1:]}}))")
    out = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout)


def find_env(name: str) -> PeerEnv | None:
    """The provisioned environment of peer ``name``, or None (never builds one)."""
    spec = PEERS[name]
    root = env_dir(spec)
    try:
        info = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return None
    env = PeerEnv(root, spec, info)
    return env if env.executable.exists() else None


def provision(name: str, console: Console | None = None) -> PeerEnv:
    """Return the cached environment of peer ``name``, building it first if needed."""
    if env := find_env(name):
        return env
    spec = PEERS[name]
    root = env_dir(spec)

    def build(python: Path, pip: Pip) -> dict:
        pip(["install", *spec.requirements], f"installing {spec.slug}")
        return {"requirements": list(spec.requirements), **_installed(python, spec),
                "size_mb": _size_mb(root)}

    info = cached_env(root, spec.slug, build, console or Console(stderr=True),
                      base_python=find_python(spec.min_python))
    return PeerEnv(root, spec, info)
