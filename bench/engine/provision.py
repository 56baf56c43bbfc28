"""Engine environments: one cached virtual environment per engine spec.

``provision(spec)`` creates ``<cache>/engines/<slug>``, installs the spec with pip
(streaming progress), applies CPU repairs where the probe calls for them, verifies
that vLLM and the multimodal processors import, and records the result in
``saltbench-env.json``. A second call reuses it. ``open_env(python)`` verifies an
existing environment without changing it.
"""

from __future__ import annotations

import collections
import json
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from rich.console import Console

from bench.cachedirs import cache_dir, locked
from bench.docio import write_json
from bench.engine import cpu_repairs
from bench.engine.environment import EngineEnv
from bench.engine.serve_flags import serve_flags
from bench.engine.spec import EngineSpec
from bench.errors import BenchError

MARKER = "saltbench-env.json"
#: Imports an environment must pass to serve the suite's multimodal model.
REQUIRED = ("vllm", "transformers", "image_processor", "video_processor",
            "audio_processor", "omni_processor", "omni_model")


def script(name: str) -> Path:
    """Path of a helper script that runs inside the engine environment."""
    return Path(str(resources.files("bench.engine") / "scripts" / name))


def run_probe(python: Path) -> dict:
    """Run probe_env.py with ``python``; its JSON report."""
    proc = subprocess.run([str(python), str(script("probe_env.py"))],
                          capture_output=True, text=True, timeout=600)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise BenchError(f"engine python {python}: the environment probe failed "
                         f"(exit {proc.returncode}):\n{proc.stderr[-2000:]}") from None


def verify(python: Path, probe: dict) -> None:
    """Raise a BenchError listing every required import that fails."""
    failures = {n: probe["imports"][n] for n in REQUIRED if probe["imports"][n]["status"] != "ok"}
    if failures:
        lines = [f"  {n}: {r.get('error', r['status'])}" for n, r in failures.items()]
        raise BenchError(f"engine python {python}: environment cannot serve the suite:\n"
                         + "\n".join(lines))


#: Logs and CI get a line this often while pip works (a terminal gets a live status line).
HEARTBEAT_S = 15.0
_PIP_STEPS = ("Collecting", "Downloading", "Installing", "Successfully", "Building",
              "Uninstalling", "Using cached")


class Pip:
    """Runs pip in the engine environment, showing its current step on a status line."""

    def __init__(self, python: Path, console: Console) -> None:
        self.python, self.console = python, console

    def __call__(self, args: list[str], what: str) -> None:
        cmd = [str(self.python), "-m", "pip", "--disable-pip-version-check", *args]
        tail: collections.deque[str] = collections.deque(maxlen=40)
        lines: queue.Queue[str | None] = queue.Queue()
        start = last_print = time.monotonic()
        step = "starting"
        with self.console.status(what) as status, subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc:
            threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
            while True:
                try:
                    line = lines.get(timeout=HEARTBEAT_S)  # wakes up even when pip is quiet
                except queue.Empty:
                    line = ""
                if line is None:
                    break
                if line:
                    tail.append(line)
                if line.startswith(_PIP_STEPS):
                    step = line[:100]
                now = time.monotonic()
                status.update(f"{what} [{now - start:.0f}s]: {step}")
                if not self.console.is_terminal and now - last_print >= HEARTBEAT_S:
                    self.console.print(f"{what} [{now - start:.0f}s]: {step}", highlight=False)
                    last_print = now
        if proc.returncode != 0:
            raise BenchError(f"pip {' '.join(args)} failed (exit {proc.returncode}); "
                             f"last lines of its output:\n" + "\n".join(tail))
        self.console.print(f"[green]✓[/] {what} ({time.monotonic() - start:.0f}s)")


def _pump(stream, lines: queue.Queue) -> None:
    """Move a pipe's lines into a queue; ``None`` marks its end."""
    for line in stream:
        lines.put(line.rstrip())
    lines.put(None)


def env_dir(spec: EngineSpec) -> Path:
    return cache_dir("engines") / spec.slug


def cached_env(root: Path, title: str, build: Callable[[Path, Pip], dict],
               console: Console, base_python: str = sys.executable) -> dict:
    """The marker (info) of the cached virtual environment ``root``, built first if needed.

    Under the entry's lock: a valid marker is reused; otherwise a half-built or corrupt
    environment is removed, a venv created (by ``base_python``) and ``build(python, pip)``
    fills it and returns
    its info (a failure removes it again); the info gets ``provision_s`` and is written.
    """
    python = root / "bin" / "python"
    with locked(root):
        marker = root / MARKER
        if marker.exists() and python.exists():
            try:
                return json.loads(marker.read_text())
            except ValueError:
                console.print(f"[yellow]{marker} is corrupt: rebuilding the environment[/]")
        if root.exists():  # a half-built environment from an interrupted run
            shutil.rmtree(root)
        console.print(f"Provisioning {title} in {root} (first time only)")
        start = time.monotonic()
        try:
            subprocess.run([base_python, "-m", "venv", str(root)], check=True,
                           capture_output=True, text=True)
            info = build(python, Pip(python, console))
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        info["provision_s"] = round(time.monotonic() - start, 1)
        write_json(marker, info)
        repairs = info.get("repairs")
        console.print(f"[green]✓[/] {title} ready in {info['provision_s']:.0f}s"
                      + (f"; repairs: {'; '.join(repairs)}" if repairs else ""))
        return info


#: Distributions whose CPU builds (local version ``+cpu``) a CUDA engine must not take.
TORCH_DISTRIBUTIONS = ("torch", "torchvision", "torchaudio")


def no_cpu_torch(spec: EngineSpec, pip: Pip) -> list[str]:
    """Requirements that keep CPU builds of torch out of a CUDA engine: pip prefers a
    ``torch==V+cpu`` wheel in a configured find-links folder to PyPI's CUDA ``torch==V``
    (the pin ``==V`` ignores local labels), and vLLM then fails to import. One dry run
    (``pip install --dry-run --report``) finds them; each becomes ``NAME!=V+cpu``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip(["install", "--dry-run", "--quiet", "--report", str(report), spec.requirement],
            f"resolving {spec}")
        chosen = [i["metadata"] for i in json.loads(report.read_text())["install"]]
    return [f"{m['name']}!={m['version']}" for m in chosen
            if m["name"] in TORCH_DISTRIBUTIONS and "+cpu" in m["version"]]


def provision(spec: EngineSpec, console: Console | None = None) -> EngineEnv:
    """Return the cached environment for ``spec``, building it first if needed."""
    def build(python: Path, pip: Pip) -> dict:
        excluded = [] if spec.is_cpu else no_cpu_torch(spec, pip)
        pip(["install", spec.requirement, *excluded], f"installing {spec}"
            + (f" (excluding {', '.join(excluded)})" if excluded else ""))
        probe = run_probe(python)
        repairs = cpu_repairs.repair(probe, pip) if spec.is_cpu else []
        if repairs:
            probe = run_probe(python)
        probe, steps = cpu_repairs.older_transformers(probe, pip, lambda: run_probe(python))
        verify(python, probe)
        info = {"spec": str(spec), "versions": probe["versions"], "python": probe["python"],
                "repairs": repairs + steps, "excluded": excluded}
        serve_flags(EngineEnv(python, info))  # cached beside the marker
        return info

    root = env_dir(spec)
    info = cached_env(root, f"engine environment {spec}", build, console or Console(stderr=True))
    return EngineEnv(root / "bin" / "python", info)


def open_env(python: Path) -> EngineEnv:
    """Verify an existing engine interpreter (``--engine-python``) without changing it."""
    if not python.exists():
        raise BenchError(f"--engine-python {python}: no such file")
    probe = run_probe(python)
    verify(python, probe)
    return EngineEnv(python, {"spec": None, "versions": probe["versions"],
                              "python": probe["python"], "repairs": []})
