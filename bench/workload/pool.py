"""The media pool of one workload: contents chosen by seed, each file written once on first use."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from bench.media import MediaFile, audio, file_digest, image, video
from bench.vocab import MEDIA_MODALITIES
from bench.workload import manifest
from bench.workload.spec import WorkloadSpec

PREFIX = {"image": "img", "audio": "aud", "video": "vid"}
_VARIANT = "-v"


class MediaPool:
    """Hands out media ids for request slots and writes ``media/`` files plus ``media.jsonl``.

    Contents ``0 .. pool-1`` are shared; a slot that does not reuse gets a fresh content
    used once. A *variant* is the same content re-encoded (other format, subtype or CRF).
    """

    def __init__(self, spec: WorkloadSpec, out: Path, index: TextIO):
        self.spec, self.out, self.index = spec, out, index
        self.sha256: dict[str, str] = {}
        self.bytes = 0
        self.seconds = 0.0
        self._fresh = {m: s.pool for m, s in spec.media.items()}
        (out / manifest.MEDIA_DIR).mkdir(parents=True, exist_ok=True)

    def pick(self, modality: str, g: np.random.Generator) -> str:
        """A media id for one slot, written to disk if this is its first use."""
        ms = self.spec.media[modality]
        if ms.pool and g.random() < ms.reuse:
            content, variant = int(g.integers(ms.pool)), bool(g.random() < ms.variants)
        else:
            content, variant = self._fresh[modality], False
            self._fresh[modality] += 1
        return self._ensure(modality, content, variant)

    def variant_of(self, media_id: str) -> str:
        """The other encoding of the same content (written on first use)."""
        modality, content, variant = _parse(media_id)
        return self._ensure(modality, content, not variant)

    def _ensure(self, modality: str, content: int, variant: bool) -> str:
        content_id = f"{PREFIX[modality]}-{content:05d}"
        media_id = content_id + (_VARIANT if variant else "")
        if media_id not in self.sha256:
            start = time.perf_counter()
            written = encode(self.spec, self.out, media_id)
            sha, size = file_digest(written.path)
            self.seconds += time.perf_counter() - start
            self.sha256[media_id] = sha
            self.bytes += size
            self.index.write(manifest.dump({
                "id": media_id, "modality": modality,
                "path": written.path.relative_to(self.out).as_posix(), "mime": written.mime,
                "sha256": sha, "bytes": size, "content_id": content_id, "variant": variant,
                "params": written.params}))
        return media_id


def encode(spec: WorkloadSpec, out: Path, media_id: str) -> MediaFile:
    """Write media item ``media_id`` of ``spec`` into ``out``'s media directory, atomically.

    The same spec, id and library versions give the same bytes: a damaged file is rebuilt so.
    """
    modality, content, variant = _parse(media_id)
    ms = spec.media[modality]
    g = np.random.default_rng([spec.seed, MEDIA_MODALITIES.index(modality), content])
    p: dict[str, Any] = ms.params
    kind = str(g.choice(ms.kinds))
    seed = int(g.integers(2**63))
    stem = out / manifest.MEDIA_DIR / media_id
    if modality == "image":
        fmt = str(g.choice(p["formats"]))
        if variant:
            fmt = "png" if fmt == "jpeg" else "jpeg"
        return image.write(stem, kind=kind, width=_pick(g, p["width"]),
                           height=_pick(g, p["height"]), seed=seed, fmt=fmt,
                           quality=p["jpeg_quality"])
    if modality == "audio":
        subtype = p["subtype"]
        if variant:
            subtype = "PCM_16" if subtype == "FLOAT" else "FLOAT"
        lo, hi = p["duration_s"]
        return audio.write(stem, kind=kind, sample_rate=p["sample_rate"],
                           channels=p["channels"], duration_s=round(g.uniform(lo, hi), 2),
                           seed=seed, subtype=subtype)
    crf = p["crf"]
    if variant:
        crf = crf + 6 if crf <= 39 else crf - 6
    return video.write(stem, kind=kind, width=_pick(g, p["width"]) & ~1,
                       height=_pick(g, p["height"]) & ~1, fps=p["fps"],
                       frame_count=_pick(g, p["frames"]), seed=seed, crf=crf)


def _parse(media_id: str) -> tuple[str, int, bool]:
    """(modality, content number, variant) of a media id such as ``img-00003-v``."""
    modality = next(m for m, p in PREFIX.items() if media_id.startswith(p + "-"))
    return modality, int(media_id.split("-")[1]), media_id.endswith(_VARIANT)


def _pick(g: np.random.Generator, span: tuple[int, int]) -> int:
    return int(g.integers(span[0], span[1] + 1))
