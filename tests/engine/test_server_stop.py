"""Stopping and pausing a managed server: a second signal escalates, the server dies with
saltbench (paused too), and a paused server stops at once.

The "server" here is a stand-in started exactly as vLLM is (``ManagedServer``, its own
process group) that ignores SIGTERM, as a vLLM API server holding connections was seen to
do: the subject is saltbench's process handling, not vLLM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Serves /health on --port, ignores SIGTERM and has a child that does too (as vLLM's
#: engine core is a child of its API server).
STUBBORN_SERVER = """
import http.server, signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""

#: saltbench's signal handling around a managed server, as every command has it.
DRIVER = """
import sys, time
from pathlib import Path
from bench.cli import install_signal_handlers
from bench.engine.server import ManagedServer, ServerConfig
install_signal_handlers()
config = ServerConfig(model="m", served_name="m", media_dir=Path(sys.argv[2]))
try:
    with ManagedServer(Path(sys.argv[1]), config, Path(sys.argv[2]) / "server.log") as server:
        if len(sys.argv) > 3:
            server.pause()
        print(server.proc.pid, flush=True)  # the group's leader
        time.sleep(600)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job of a script


@contextlib.contextmanager
def driver(tmp_path: Path, paused: bool = False,
           server: str = STUBBORN_SERVER) -> Iterator[tuple[subprocess.Popen, int]]:
    """The driver (SIGINT inherited as ignored) and its server's pid (the server paused once
    up, if ``paused``); both killed at the end."""
    (tmp_path / "server.py").write_text(server)
    python = tmp_path / "python"  # ManagedServer runs `python -m vllm... serve MODEL FLAGS`
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "server.py"} "$@"\n')
    python.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(DRIVER), str(python),
                             str(tmp_path), *(["pause"] if paused else [])],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True, preexec_fn=_ignore_sigint)
    server_group = None
    try:
        server_group = int(proc.stdout.readline())
        yield proc, server_group
    finally:
        for pgid in (proc.pid, server_group):
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.killpg(pgid, signal.SIGKILL)
        proc.communicate()


def _alive(pgid: int) -> list[psutil.Process]:
    """The live (non-zombie) processes of a process group."""
    out = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def _gone(pgid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_kills_a_server_that_ignores_the_first(tmp_path: Path, sig) -> None:
    with driver(tmp_path) as (proc, server_group):
        proc.send_signal(sig)
        time.sleep(1.5)
        assert proc.poll() is None, "saltbench waits for the server's grace period"
        assert len(_alive(server_group)) == 3, "reaper, server and its child ignore SIGTERM"
        started = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == 130
        assert _gone(server_group, 1), "the server was abandoned"
        print(f"second {sig.name}: saltbench and server gone in "
              f"{time.monotonic() - started:.2f} s")


def test_the_server_dies_with_saltbench_even_by_sigkill(tmp_path: Path) -> None:
    with driver(tmp_path) as (proc, server_group):
        proc.kill()
        proc.wait(timeout=5)
        assert _gone(server_group, 5), "the server outlived saltbench"


def test_a_paused_server_dies_with_saltbench(tmp_path: Path) -> None:
    """Paused, the server's processes are stopped but the reaper that leads its group is
    not: it still kills the group when saltbench dies."""
    with driver(tmp_path, paused=True) as (proc, server_group):
        states = {p.pid: p.status() for p in _alive(server_group)}
        assert states.pop(server_group) != psutil.STATUS_STOPPED
        assert set(states.values()) == {psutil.STATUS_STOPPED}, states
        proc.kill()
        proc.wait(timeout=5)
        assert _gone(server_group, 5), "the paused server outlived saltbench"


def test_pause_resume_and_stop_a_paused_server(tmp_path: Path) -> None:
    """A paused server does not answer; resumed, it does; paused again, stop() ends it at
    once (continued first: a stopped process would hold SIGTERM for the grace period)."""
    from bench.engine.server import ManagedServer, ServerConfig, http_ok

    (tmp_path / "server.py").write_text(STUBBORN_SERVER.replace(
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)", ""))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "server.py"} "$@"\n')
    python.chmod(0o755)
    config = ServerConfig(model="m", served_name="m", media_dir=tmp_path)
    server = ManagedServer(python, config, tmp_path / "server.log")
    try:
        server.start()
        group = server.proc.pid
        server.pause()
        assert not http_ok(f"{server.base_url}/health", timeout_s=1.0)
        server.resume()
        assert http_ok(f"{server.base_url}/health")
        server.pause()
        started = time.monotonic()
        server.stop(grace_s=20)
        assert time.monotonic() - started < 10
        assert _gone(group, 1)
    finally:
        server.stop()


def test_servers_stopped_together_share_one_grace(tmp_path: Path) -> None:
    """Two servers that ignore SIGTERM, stopped together, cost one grace period, not one
    each (an A/B stops its pair of servers eight times), and both groups are gone."""
    from bench.engine.server import ManagedServer, ServerConfig, stop_all

    (tmp_path / "server.py").write_text(STUBBORN_SERVER)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "server.py"} "$@"\n')
    python.chmod(0o755)
    config = ServerConfig(model="m", served_name="m", media_dir=tmp_path)
    servers = [ManagedServer(python, config, tmp_path / f"server-{i}.log") for i in range(2)]
    try:
        for server in servers:
            server.start()
        groups = [server.proc.pid for server in servers]
        started = time.monotonic()
        stop_all(servers, grace_s=3)
        took = time.monotonic() - started
        assert 3 <= took < 5.5, f"stopping both took {took:.1f} s with a 3 s grace"
        assert all(_gone(group, 1) for group in groups)
        assert all(server.proc is None for server in servers)
    finally:
        stop_all(servers)
