"""The zero-work server in its own process (never a thread of the client it serves)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

from bench.engine.reaper import die_with_parent
from bench.engine.server import free_port, http_ok
from bench.errors import BenchError


class ZeroWorkServer:
    """``python -m bench.zerowork`` on a free loopback port, in its own process group.

    A context manager: entering starts it and waits for ``/health``; leaving (whatever
    happened) sends the group SIGTERM, then SIGKILL after ``grace_s``. ``url`` is its base.
    """

    def __init__(self, *, block_size: int = 32, itl_ms: float = 0.0,
                 output_tokens: int | None = None, start_timeout_s: float = 30.0,
                 grace_s: float = 5.0, port: int | None = None, prefill_ms: float = 0.0,
                 slots: int = 1) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [sys.executable, "-m", "bench.zerowork", "--port", str(self.port),
                        "--block-size", str(block_size), "--itl-ms", str(itl_ms),
                        "--prefill-ms", str(prefill_ms), "--slots", str(slots)]
        if output_tokens is not None:
            self.command += ["--output-tokens", str(output_tokens)]
        self.start_timeout_s, self.grace_s = start_timeout_s, grace_s
        self.proc: subprocess.Popen | None = None
        self._stderr = tempfile.TemporaryFile()

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._stderr,
                                     start_new_session=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + self.start_timeout_s
        try:
            while not http_ok(f"{self.url}/health", timeout_s=1.0):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise BenchError(f"zero-work server on port {self.port} did not start:\n"
                                     f"{self.stderr_tail()}")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    def stderr_tail(self, limit: int = 2000) -> str:
        """The end of what the server wrote to stderr (nothing, unless it failed)."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-limit:]

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; idempotent."""
        if self.proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=self.grace_s)
                break
        self.proc = None

    def __enter__(self) -> ZeroWorkServer:
        try:
            self.start()
        except BaseException:
            self._stderr.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._stderr.close()
