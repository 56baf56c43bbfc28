"""saltbench's CLI as a child process that a test always stops, whatever happens.

The child starts with SIGINT ignored, as every background job of a non-interactive shell
does, so the tests prove that saltbench installs its own handlers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def saltbench_process(*args: str, env: dict[str, str] | None = None
                      ) -> Iterator[subprocess.Popen]:
    """``run_bench.py ARGS`` in its own process group, killed (the group) on exit; ``env``
    is added to the environment."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "run_bench.py"), *args],
                            env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_ignore_sigint)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
