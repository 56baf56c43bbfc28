"""A managed vLLM server: flags, a free port, start, health wait, stop by process group."""

from __future__ import annotations

import collections
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.errors import BenchError

DEFAULT_LIMIT_MM = {"image": 2, "audio": 2, "video": 2}
#: Flags the suite can do without: left out (and recorded) where ``vllm serve`` lacks them.
#: Older servers mount the scale-out routes without a flag; without the prompt-token
#: details, cached tokens are not reported per request.
OPTIONAL_FLAGS = frozenset({"--enable-scale-out", "--enable-prompt-tokens-details"})


@dataclass
class ServerConfig:
    """Everything that decides how the engine is started (recorded with every result)."""

    model: str
    served_name: str
    media_dir: Path
    load_format: str | None = None
    block_size: int = 32
    max_model_len: int = 8192
    max_num_seqs: int = 8
    max_num_batched_tokens: int | None = None
    limit_mm: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMIT_MM))
    cpu_kvcache_gib: int | None = 1  # CPU engines only
    extra_args: list[str] = field(default_factory=list)

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
            ["--max-num-seqs", str(self.max_num_seqs)],
            ["--limit-mm-per-prompt", json.dumps(self.limit_mm, separators=(",", ":"))],
            ["--allowed-local-media-path", str(self.media_dir)],
            ["--seed", "0"],
        ]
        if self.max_num_batched_tokens:
            groups.append(["--max-num-batched-tokens", str(self.max_num_batched_tokens)])
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
        env = {"HF_HUB_OFFLINE": "1", "VLLM_SERVER_DEV_MODE": "1",  # reset endpoints
               "VLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
        if self.cpu_kvcache_gib:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.cpu_kvcache_gib)
        return env


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
    """Starts ``python -m vllm... serve`` in its own process group and stops all of it."""

    def __init__(self, python: Path, config: ServerConfig, log_path: Path,
                 port: int | None = None, start_timeout_s: float = 600.0,
                 supported: frozenset[str] | None = None, engine: str = "this vLLM") -> None:
        if port is not None:
            check_port_free(port)
        self.python, self.config, self.log_path = python, config, log_path
        self.port = port or free_port()
        #: The arguments after the model (a BenchError here when an essential flag is missing).
        self.flags = config.flags(self.port, supported, engine)
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.start_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def command(self) -> list[str]:
        return [str(self.python), "-m", "vllm.entrypoints.cli.main", "serve",
                self.config.model, *self.flags]

    def start(self) -> None:
        """Start and wait for ``/health``; on failure stop everything and raise with the log tail."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **self.config.env()}, start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        try:
            while not http_ok(f"{self.base_url}/health"):
                if self.proc.poll() is not None:
                    raise BenchError(
                        f"vLLM server exited with code {self.proc.returncode} during start-up; "
                        f"last lines of {self.log_path}:\n{log_tail(self.log_path)}")
                if time.monotonic() - started > self.start_timeout_s:
                    raise BenchError(
                        f"vLLM server did not answer /health within {self.start_timeout_s:.0f}s; "
                        f"last lines of {self.log_path}:\n{log_tail(self.log_path)}")
                time.sleep(1.0)
        except BaseException:
            self.stop()
            raise
        self.start_s = time.monotonic() - started

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM the whole process group, then SIGKILL what is left after ``grace_s``."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the group id is the leader's pid
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _group_alive(pgid):
                self.proc.poll()
                time.sleep(0.2)
            if not _group_alive(pgid):
                break
        self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> ManagedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child: get SIGTERM if saltbench dies, even by SIGKILL (Linux only)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the process group."""
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False
