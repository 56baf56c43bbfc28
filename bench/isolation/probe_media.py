"""Fresh media for isolation probes: distinct content of one size per modality, by seed.

Probes need media that no other request (and no other probe) has sent, so each
(purpose, index) gets its own seed. Files are cached under ``<cache>/probe-media``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from bench.cachedirs import cache_dir
from bench.media import audio, file_digest, image, video
from bench.workload import MediaItem

#: Sizes chosen so that preprocessing and encoding are a visible part of a cold request.
SIZES = {
    "image": {"width": 448, "height": 448},
    "audio": {"sample_rate": 16000, "channels": 1, "duration_s": 2.0},
    "video": {"width": 128, "height": 128, "fps": 4, "frame_count": 16},
}

FILES = {"image": (".png", "image/png"), "audio": (".wav", "audio/wav"),
         "video": (".mp4", "video/mp4")}


def _write(modality: str, stem: Path, seed: int):
    size = SIZES[modality]
    if modality == "image":
        return image.write(stem, kind="shapes", seed=seed, fmt="png", quality=90, **size)
    if modality == "audio":
        return audio.write(stem, kind="chirp", seed=seed, subtype="PCM_16", **size)
    return video.write(stem, kind="bouncing-ball", seed=seed, crf=23, **size)


def probe_media(modality: str, purpose: str, index: int) -> MediaItem:
    """The ``index``-th fresh item of ``modality`` for ``purpose`` (same args, same file)."""
    seed = int.from_bytes(hashlib.sha256(f"{modality}/{purpose}/{index}".encode()).digest()[:4],
                          "big")
    suffix, mime = FILES[modality]
    path = cache_dir("probe-media") / modality / f"{purpose}-{index:04d}{suffix}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(modality, path.with_suffix(""), seed)
    sha, size = file_digest(path)
    name = f"{modality}-{purpose}-{index}"
    return MediaItem(id=name, modality=modality, path=path, mime=mime, sha256=sha, bytes=size,
                     content_id=name, variant=False, params=dict(SIZES[modality]))
