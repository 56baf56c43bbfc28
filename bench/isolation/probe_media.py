"""Fresh media for probes: distinct content of one size per modality.

Probes need media that no other request (and no other probe) has sent: each name gets
its own seed. Files go to a directory the caller owns (and removes when done).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from bench.media import audio, file_digest, image, video
from bench.workload import MediaItem

#: Sizes chosen so that preprocessing and encoding are a visible part of a cold request.
SIZES = {
    "image": {"width": 448, "height": 448},
    "audio": {"sample_rate": 16000, "channels": 1, "duration_s": 2.0},
    "video": {"width": 128, "height": 128, "fps": 4, "frame_count": 16},
}
#: Other sizes, with other prompt-token counts: content that reaches a request in another
#: item's place shows in its prompt size (bench.isolation.uuid_probe).
OTHER_SIZES = {
    "image": {"width": 336, "height": 336},
    "audio": {"duration_s": 3.0},
    "video": {"frame_count": 8},
}


def _write(modality: str, stem: Path, seed: int, size: dict):
    if modality == "image":
        return image.write(stem, kind="shapes", seed=seed, fmt="png", quality=90, **size)
    if modality == "audio":
        return audio.write(stem, kind="chirp", seed=seed, subtype="PCM_16", **size)
    return video.write(stem, kind="bouncing-ball", seed=seed, crf=23, **size)


def probe_media(modality: str, name: str, root: Path, other_size: bool = False) -> MediaItem:
    """A fresh ``modality`` item called ``name`` in ``root``, written atomically, of the
    standard size or (``other_size``) of :data:`OTHER_SIZES`.

    The content depends on ``root`` too: give every run its own root, and no media of one
    run is ever in a server's caches from another.
    """
    key = f"{root.resolve()}/{modality}/{name}"
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
    size = {**SIZES[modality], **(OTHER_SIZES[modality] if other_size else {})}
    written = _write(modality, root / name, seed, size)
    sha, nbytes = file_digest(written.path)
    return MediaItem(id=name, modality=modality, path=written.path, mime=written.mime, sha256=sha,
                     bytes=nbytes, content_id=name, variant=False, params=size)
