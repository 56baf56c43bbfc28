"""Synthetic audio (tones, chirps, noise) written as WAV by soundfile/libsndfile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from bench.docio import replacing
from bench.media import MediaFile, rng

KINDS = ("tone", "chirp", "noise")
SUBTYPES = ("PCM_16", "PCM_24", "PCM_32", "FLOAT")

# libsndfile's PEAK chunk (float WAV) carries a wall-clock timestamp; soundfile has no
# public switch for it, so the documented sf_command is sent through its cffi handle.
_SFC_SET_ADD_PEAK_CHUNK = 0x1050


def render(kind: str, sample_rate: int, channels: int, duration_s: float,
           seed: int) -> np.ndarray:
    """Samples shaped (frames, channels), quantised to 16 bits so every subtype is lossless."""
    g = rng(seed)
    n = max(1, round(sample_rate * duration_s))
    t = np.arange(n) / sample_rate
    out = np.empty((n, channels))
    for ch in range(channels):
        if kind == "tone":
            freqs = g.uniform(110.0, 1760.0, size=3)
            sig = sum(np.sin(2 * np.pi * f * t + g.uniform(0, 2 * np.pi)) for f in freqs) / 3
        elif kind == "chirp":
            f0, f1 = g.uniform(100.0, sample_rate / 4, size=2)
            sig = np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * max(duration_s, 1e-9))))
        elif kind == "noise":
            sig = g.uniform(-1.0, 1.0, size=n)
        else:
            raise ValueError(f"unknown audio kind {kind!r}")
        out[:, ch] = 0.5 * sig
    return np.round(out * 32767).astype(np.int16)


def write(stem: Path, *, kind: str, sample_rate: int, channels: int, duration_s: float,
          seed: int, subtype: str) -> MediaFile:
    """Render and encode one WAV file to ``stem`` + ``.wav``, atomically."""
    path = stem.with_suffix(".wav")
    samples = render(kind, sample_rate, channels, duration_s, seed)
    with replacing(path) as tmp, sf.SoundFile(tmp, "w", sample_rate, channels, subtype,
                                              format="WAV") as f:
        sf._snd.sf_command(f._file, _SFC_SET_ADD_PEAK_CHUNK, sf._ffi.NULL, 0)
        f.write(samples)
    params = {"sample_rate": sample_rate, "channels": channels, "frames": len(samples),
              "duration_s": len(samples) / sample_rate, "subtype": subtype, "kind": kind}
    return MediaFile(path, "audio/wav", params)
