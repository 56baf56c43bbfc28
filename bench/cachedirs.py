"""Where saltbench keeps what it builds: engines, models and workload media.

``SALTBENCH_CACHE`` overrides the per-user cache directory.
"""

from __future__ import annotations

import os
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
