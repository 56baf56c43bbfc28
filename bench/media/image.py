"""Synthetic images (gradient, shapes, noise, text-like) written as PNG or JPEG by Pillow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from bench.docio import replacing
from bench.media import MediaFile, rng

KINDS = ("gradient", "shapes", "noise", "text")
#: format -> (MIME type, file suffix)
FORMATS = {"png": ("image/png", ".png"), "jpeg": ("image/jpeg", ".jpg")}

_WORDS = "alpha bravo cache delta echo block salt token prefix hash frame pixel".split()


def render(kind: str, width: int, height: int, seed: int) -> Image.Image:
    """An RGB picture of ``kind``; the same arguments give the same pixels."""
    g = rng(seed)
    if kind == "gradient":
        x = np.linspace(0.0, 1.0, width)[None, :, None]
        y = np.linspace(0.0, 1.0, height)[:, None, None]
        a, b, c = g.uniform(0, 255, size=(3, 3))
        pixels = a + (b - a) * x + (c - a) * y
        return Image.fromarray(pixels.clip(0, 255).astype(np.uint8), "RGB")
    if kind == "noise":
        return Image.fromarray(g.integers(0, 256, size=(height, width, 3), dtype=np.uint8), "RGB")
    img = Image.new("RGB", (width, height), tuple(int(v) for v in g.integers(0, 256, 3)))
    draw = ImageDraw.Draw(img)
    if kind == "shapes":
        for _ in range(int(g.integers(3, 9))):
            x0, x1 = sorted(int(v) for v in g.integers(0, width, 2))
            y0, y1 = sorted(int(v) for v in g.integers(0, height, 2))
            fill = tuple(int(v) for v in g.integers(0, 256, 3))
            (draw.ellipse if g.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=fill)
        return img
    if kind == "text":
        font = ImageFont.load_default()
        ink = tuple(255 - v for v in img.getpixel((0, 0)))
        for top in range(2, height - 10, 14):
            line = " ".join(_WORDS[int(i)] for i in g.integers(0, len(_WORDS), 6))
            draw.text((2, top), line, fill=ink, font=font)
        return img
    raise ValueError(f"unknown image kind {kind!r}")


def write(stem: Path, *, kind: str, width: int, height: int, seed: int, fmt: str,
          quality: int) -> MediaFile:
    """Render and encode one image to ``stem`` + the format's suffix, atomically."""
    mime, suffix = FORMATS[fmt]
    path = stem.with_suffix(suffix)
    img = render(kind, width, height, seed)
    with replacing(path) as tmp:
        if fmt == "jpeg":
            img.save(tmp, "JPEG", quality=quality, optimize=False, progressive=False)
        else:
            img.save(tmp, "PNG", optimize=False)
    params = {"width": width, "height": height, "format": fmt, "kind": kind}
    if fmt == "jpeg":
        params["quality"] = quality
    return MediaFile(path, mime, params)
