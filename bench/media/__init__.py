"""Deterministic media synthesis: one module per modality, files written by standard encoders.

Same arguments (including ``seed``) give byte-identical files for the same library versions,
which :func:`library_versions` reports for the workload metadata.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class MediaFile:
    """A written media file: where it is, its MIME type and the parameters it was encoded with."""

    path: Path
    mime: str
    params: dict[str, Any]


def rng(seed: int) -> np.random.Generator:
    """The random generator for one media item's content."""
    return np.random.default_rng(seed)


def file_digest(path: Path) -> tuple[str, int]:
    """The sha256 hex digest and size in bytes of a file."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def file_problem(path: Path, sha256: str, size: int) -> str | None:
    """What is wrong with a file recorded with ``size`` bytes and ``sha256``, or ``None``."""
    try:
        found = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if found != size:
        return f"{found} bytes, {size} recorded"
    if file_digest(path)[0] != sha256:
        return "sha256 differs from the one recorded"
    return None


def library_versions() -> dict[str, str]:
    """Versions of every library whose output ends up in media bytes."""
    import av
    import PIL
    import soundfile

    ffmpeg = {name: ".".join(map(str, v)) for name, v in av.library_versions.items()}
    return {
        "numpy": np.__version__,
        "pillow": PIL.__version__,
        "soundfile": soundfile.__version__,
        "libsndfile": soundfile.__libsndfile_version__,
        "av": av.__version__,
        "libavcodec": ffmpeg.get("libavcodec", "?"),
        "libavformat": ffmpeg.get("libavformat", "?"),
        "libswscale": ffmpeg.get("libswscale", "?"),
    }
