"""Media references as URLs the engine accepts: ``data:`` (inline) or ``file://``.

Each file is read and base64-encoded once per run, not once per request, while the
encoded URLs fit in :data:`CACHE_BYTES`; past that the least recently used are dropped
(and encoded again if they come back), so memory stays bounded on any workload.
"""

from __future__ import annotations

import base64
import collections
import functools
import tempfile
from collections.abc import Iterable
from pathlib import Path

from bench.errors import BenchError
from bench.media import audio, image, video

URL_MODES = ("data", "file")
_STANDIN_MIME = {"image": "image/png", "audio": "audio/wav", "video": "video/mp4"}
#: The most encoded data: URLs kept in memory (characters, about bytes).
CACHE_BYTES = 64 * 2**20


class MediaUrls:
    """Maps a media file to the URL a request carries."""

    def __init__(self, mode: str = "data", allowed_dir: Path | None = None,
                 cache_bytes: int = CACHE_BYTES) -> None:
        if mode not in URL_MODES:
            raise BenchError(f"--media-url {mode!r}: expected one of {', '.join(URL_MODES)}")
        if mode == "file" and allowed_dir is None:
            raise BenchError("--media-url file needs a server whose --allowed-local-media-path "
                             "is known (a managed server); use --media-url data")
        self.mode, self.allowed_dir, self.cache_bytes = mode, allowed_dir, cache_bytes
        self._cache: collections.OrderedDict[Path, str] = collections.OrderedDict()
        self._cached = 0

    def url(self, path: Path, mime: str) -> str:
        if self.mode == "file":
            path = path.resolve()
            if self.allowed_dir not in path.parents:
                raise BenchError(f"media {path}: outside the server's allowed media path "
                                 f"{self.allowed_dir}; use --media-url data")
            return path.as_uri()
        if (url := self._cache.get(path)) is not None:
            self._cache.move_to_end(path)
            return url
        url = f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}"
        self._cache[path] = url
        self._cached += len(url)
        while self._cached > self.cache_bytes and len(self._cache) > 1:
            self._cached -= len(self._cache.popitem(last=False)[1])
        return url

    def preload(self, items: Iterable[tuple[Path, str]]) -> None:
        """Make the URLs of ``items`` (path, MIME type) before a run sends anything: each
        ``file://`` path is checked, ``data:`` URLs are encoded while they fit the cache
        (the hot loop then reads no file)."""
        for path, mime in items:
            if self.mode == "data" and self._cached + path.stat().st_size * 4 // 3 > self.cache_bytes:
                return
            self.url(path, mime)


@functools.lru_cache(maxsize=1)
def standins() -> dict[str, str]:
    """Tiny valid media per modality as data URLs (for rendering prompt templates)."""
    with tempfile.TemporaryDirectory(prefix="saltbench-standin-") as tmp:
        stem = Path(tmp) / "standin"
        files = {
            "image": image.write(stem, kind="gradient", width=28, height=28, seed=0, fmt="png",
                                 quality=90),
            "audio": audio.write(stem, kind="tone", sample_rate=16000, channels=1,
                                 duration_s=0.2, seed=0, subtype="PCM_16"),
            "video": video.write(stem, kind="moving-box", width=32, height=32, fps=2,
                                 frame_count=4, seed=0, crf=23),
        }
        return {m: f"data:{_STANDIN_MIME[m]};base64,{base64.b64encode(f.path.read_bytes()).decode()}"
                for m, f in files.items()}
