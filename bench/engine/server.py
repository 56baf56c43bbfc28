"""A managed vLLM server: flags, a free port, start, health wait, stop by process group."""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.errors import BenchError

log = logging.getLogger(__name__)

DEFAULT_LIMIT_MM = {"image": 2, "audio": 2, "video": 2}
#: Flags the suite can do without: left out (and recorded) where ``vllm serve`` lacks them.
#: Older servers mount the scale-out routes without a flag; without the prompt-token
#: details, cached tokens are not reported per request.
OPTIONAL_FLAGS = frozenset({"--enable-scale-out", "--enable-prompt-tokens-details"})
#: Sequences at once on a CPU engine (2 cores here): vLLM's GPU default of 256 would only
#: queue in the engine instead of the client.
CPU_MAX_NUM_SEQS = 8


@dataclass
class ServerConfig:
    """Everything that decides how the engine is started (recorded with every result)."""

    model: str
    served_name: str
    media_dir: Path
    load_format: str | None = None
    block_size: int = 32
    max_model_len: int = 8192
    max_num_seqs: int | None = CPU_MAX_NUM_SEQS  # None: vLLM's own default
    max_num_batched_tokens: int | None = None
    tensor_parallel_size: int | None = None
    gpu_memory_utilization: float | None = None
    #: Set ``HF_HUB_OFFLINE=1`` (a local model); else the caller's hub settings apply.
    offline: bool = True
    limit_mm: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMIT_MM))
    cpu_kvcache_gib: int | None = 1  # CPU engines only
    extra_args: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)  # on top of :meth:`env`'s own

    def _groups(self, port: int) -> list[list[str]]:
        """Every flag the suite passes, each with its values."""
        groups = [
            ["--served-model-name", self.served_name],
            ["--host", "127.0.0.1"], ["--port", str(port)],
            ["--enable-scale-out"],             # /inference/v1/generate and /render
            ["--enable-prompt-tokens-details"],  # usage.prompt_tokens_details.cached_tokens
            ["--enable-prefix-caching"],
            ["--block-size", str(self.block_size)],
            ["--max-model-len", str(self.max_model_len)],
            ["--limit-mm-per-prompt", json.dumps(self.limit_mm, separators=(",", ":"))],
            ["--allowed-local-media-path", str(self.media_dir)],
            ["--seed", "0"],
        ]
        for flag, value in (("--max-num-seqs", self.max_num_seqs),
                            ("--max-num-batched-tokens", self.max_num_batched_tokens),
                            ("--tensor-parallel-size", self.tensor_parallel_size),
                            ("--gpu-memory-utilization", self.gpu_memory_utilization)):
            if value is not None:
                groups.append([flag, str(value)])
        if self.load_format:
            groups.append(["--load-format", self.load_format])
        return groups

    def flags(self, port: int, supported: frozenset[str] | None = None,
              engine: str = "this vLLM") -> list[str]:
        """The ``vllm serve`` arguments after the model.

        With ``supported`` (the server's long options, see ``serve_flags``), optional
        flags it lacks are left out; a missing essential flag is a BenchError naming
        ``engine``. ``extra_args`` are passed as they are.
        """
        args = []
        for flag, *values in self._groups(port):
            if supported is None or flag in supported:
                args += [flag, *values]
            elif flag not in OPTIONAL_FLAGS:
                raise BenchError(f"{engine}: `vllm serve` does not accept {flag}, "
                                 "which saltbench needs")
        return args + self.extra_args

    def dropped_flags(self, supported: frozenset[str]) -> list[str]:
        """The optional flags left out for a server that accepts only ``supported``."""
        return [g[0] for g in self._groups(0) if g[0] in OPTIONAL_FLAGS and g[0] not in supported]

    def env(self) -> dict[str, str]:
        """Environment variables for the server (on top of the caller's)."""
        env = {"VLLM_SERVER_DEV_MODE": "1",  # reset endpoints
               "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
        if self.offline:
            env["HF_HUB_OFFLINE"] = "1"
        if self.cpu_kvcache_gib:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.cpu_kvcache_gib)
        return {**env, **self.extra_env}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def check_port_free(port: int) -> None:
    """Raise a BenchError when ``port`` on 127.0.0.1 is already taken.

    Like the server, ignore connections of a stopped server in TIME_WAIT (SO_REUSEADDR).
    """
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise BenchError(f"--port {port}: already in use ({exc.strerror})") from None


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    """Whether GET ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def log_tail(path: Path, lines: int = 40) -> str:
    with open(path, errors="replace") as fh:
        return "\n".join(line.rstrip() for line in collections.deque(fh, maxlen=lines))


class ManagedServer:
    """Starts ``python -m vllm... serve`` in its own process group and stops all of it.

    The server runs under :mod:`bench.engine.reaper`, which kills the group if saltbench
    dies without stopping it (even by SIGKILL).
    """

    #: What the process is, in error messages.
    label = "vLLM server"

    def __init__(self, python: Path, config: ServerConfig, log_path: Path,
                 port: int | None = None, start_timeout_s: float = 600.0,
                 supported: frozenset[str] | None = None, engine: str = "this vLLM",
                 secret_env: dict[str, str] | None = None) -> None:
        if port is not None:
            check_port_free(port)
        self.python, self.config, self.log_path = python, config, log_path
        self.port = port or free_port()
        #: The arguments after the model (a BenchError here when an essential flag is missing).
        self.flags = config.flags(self.port, supported, engine)
        self.start_timeout_s = start_timeout_s
        #: Environment the server gets but no record shows (an API key: not on its command line).
        self.secret_env = secret_env or {}
        self.proc: subprocess.Popen | None = None
        self.start_s: float | None = None
        self._launched = 0.0  # time.monotonic() at launch

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def command(self) -> list[str]:
        return [str(self.python), "-m", "vllm.entrypoints.cli.main", "serve",
                self.config.model, *self.flags]

    def start(self) -> None:
        """Start and wait for ``/health``; on failure stop everything and raise with the log tail."""
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the process (under the reaper) without waiting for it to be ready."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._launched = time.monotonic()
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench.engine.reaper", *self.command],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
                env={**os.environ, **self.config.env(), **self.secret_env},
                start_new_session=True,  # the reaper leads the group; see bench.engine.reaper
            )

    def wait_ready(self) -> None:
        """Wait for ``/health`` after :meth:`launch`; on failure stop everything and raise
        with the log tail."""
        try:
            while not http_ok(f"{self.base_url}/health"):
                if self.proc.poll() is not None:
                    raise BenchError(
                        f"{self.label} exited with code {self.proc.returncode} during start-up; "
                        f"last lines of {self.log_path}:\n{log_tail(self.log_path)}")
                if time.monotonic() - self._launched > self.start_timeout_s:
                    raise BenchError(
                        f"{self.label} did not answer /health within {self.start_timeout_s:.0f}s; "
                        f"last lines of {self.log_path}:\n{log_tail(self.log_path)}")
                time.sleep(1.0)
        except BaseException:
            self.stop()
            raise
        self.start_s = time.monotonic() - self._launched

    def pause(self) -> None:
        """SIGSTOP the server's processes while another server has the machine (an A/B's
        turns, :mod:`bench.campaigns.ab`), and return once they are stopped (at most 1 s).
        The reaper that leads the group keeps running: it must stay able to kill the group."""
        if self.proc is None:
            return
        pids = [pid for pid in _group(self.proc.pid) if pid != self.proc.pid]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 1.0  # the signal is delivered asynchronously
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if _running(pid)]
            if pids:
                time.sleep(0.001)

    def resume(self) -> None:
        """SIGCONT the whole group (what :meth:`pause` stopped)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self, grace_s: float = 30.0) -> None:
        """Stop this server as :func:`stop_all` does."""
        stop_all([self], grace_s)

    def _reap(self) -> None:
        """Wait for the reaper and close its lifeline (the group is gone by now)."""
        self.proc.wait(timeout=10)
        self.proc.stdin.close()
        self.proc = None

    def __enter__(self) -> ManagedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_all(servers: Iterable[ManagedServer], grace_s: float = 30.0) -> None:
    """SIGTERM every server's process group at once (continued first, were it paused), wait
    up to ``grace_s`` for all of them together, then SIGKILL what is left.

    Stopped together, two servers cost one wait, not two: an A/B stops a pair eight times.
    A second Ctrl-C or SIGTERM while waiting (a KeyboardInterrupt, see ``bench.cli``)
    escalates at once to SIGKILL of every group, which is waited for before it re-raises:
    no server is ever abandoned.
    """
    live = [server for server in servers if server.proc is not None]
    try:
        for server in live:
            server.resume()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while (any(_group_alive(server.proc.pid) for server in live)
               and time.monotonic() < deadline):
            time.sleep(0.2)
    finally:
        pending: KeyboardInterrupt | None = None
        for server in live:
            try:
                kill_group(server.proc.pid)
            except KeyboardInterrupt as exc:  # kill the others first, then re-raise
                pending = exc
            server._reap()
        if pending is not None:
            raise pending


def _signal_group(pgid: int, sig: int, wait_s: float) -> bool:
    """Send ``sig`` to the group and wait up to ``wait_s`` for it to be gone; gone?"""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return True
        time.sleep(0.2)
    return not _group_alive(pgid)


def kill_group(pgid: int) -> None:
    """SIGKILL whatever is left of the group and wait for it; further signals cannot
    interrupt this (they are re-raised once the group is gone)."""
    pending: KeyboardInterrupt | None = None
    for _ in range(3):  # a process stuck in the kernel may outlive SIGKILL for a while
        try:
            if _signal_group(pgid, signal.SIGKILL, 10.0):
                break
        except KeyboardInterrupt as exc:
            pending = exc
    else:
        log.warning("process group %d is still alive after SIGKILL", pgid)
    if pending is not None:
        raise pending


def _group(pgid: int) -> list[int]:
    """The pids of the process group's non-zombie processes."""
    out = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not stopped (or a zombie)."""
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_STOPPED,
                                                    psutil.STATUS_TRACING_STOP,
                                                    psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the process group."""
    return bool(_group(pgid))
