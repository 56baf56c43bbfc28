"""Synthetic moving-picture clips written as MP4 (H.264, libx264) by PyAV, bit-exactly."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from bench.docio import replacing
from bench.media import MediaFile, rng

KINDS = ("moving-box", "bouncing-ball", "scrolling-bars")

# One thread, fixed preset and bitexact muxing: no version strings, no timestamps.
_X264 = {"preset": "veryfast", "tune": "zerolatency",
         "x264-params": "threads=1:lookahead-threads=1:sliced-threads=0"}


def frames(kind: str, width: int, height: int, count: int, seed: int):
    """Yield ``count`` RGB frames (height, width, 3) of ``kind`` moving content."""
    g = rng(seed)
    bg = g.integers(0, 256, 3, dtype=np.uint8)
    fg = g.integers(0, 256, 3, dtype=np.uint8)
    size = max(4, min(width, height) // 4)
    vx, vy = g.uniform(1.0, 4.0, size=2)
    yy, xx = np.mgrid[0:height, 0:width]
    for i in range(count):
        frame = np.empty((height, width, 3), np.uint8)
        frame[:] = bg
        x = int(vx * i) % max(1, width - size)
        y = int(vy * i) % max(1, height - size)
        if kind == "moving-box":
            frame[y:y + size, x:x + size] = fg
        elif kind == "bouncing-ball":
            span_x, span_y = max(1, width - size), max(1, height - size)
            bx = abs((int(vx * i * 2) % (2 * span_x)) - span_x) + size // 2
            by = abs((int(vy * i * 2) % (2 * span_y)) - span_y) + size // 2
            frame[(xx - bx) ** 2 + (yy - by) ** 2 <= (size // 2) ** 2] = fg
        elif kind == "scrolling-bars":
            frame[((xx + int(vx * i * 2)) // size) % 2 == 0] = fg
        else:
            raise ValueError(f"unknown video kind {kind!r}")
        yield frame


def write(stem: Path, *, kind: str, width: int, height: int, fps: int, frame_count: int,
          seed: int, crf: int) -> MediaFile:
    """Render and encode one clip to ``stem`` + ``.mp4``, atomically (width and height even)."""
    path = stem.with_suffix(".mp4")
    with replacing(path) as tmp, av.open(str(tmp), "w", format="mp4",
                                         container_options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.thread_count = 1
        stream.options = {**_X264, "crf": str(crf)}
        for frame in frames(kind, width, height, frame_count, seed):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        out.mux(stream.encode(None))
    params = {"width": width, "height": height, "fps": fps, "frames": frame_count,
              "duration_s": frame_count / fps, "codec": "h264", "crf": crf, "kind": kind}
    return MediaFile(path, "video/mp4", params)
