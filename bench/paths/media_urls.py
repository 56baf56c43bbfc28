"""Media references as URLs the engine accepts: ``data:`` (inline) or ``file://``.

Each file is read and base64-encoded once per run, not once per request.
"""

from __future__ import annotations

import base64
import functools
import tempfile
from pathlib import Path

from bench.errors import BenchError
from bench.media import audio, image, video

URL_MODES = ("data", "file")
_STANDIN_MIME = {"image": "image/png", "audio": "audio/wav", "video": "video/mp4"}


class MediaUrls:
    """Maps a media file to the URL a request carries."""

    def __init__(self, mode: str = "data", allowed_dir: Path | None = None) -> None:
        if mode not in URL_MODES:
            raise BenchError(f"--media-url {mode!r}: expected one of {', '.join(URL_MODES)}")
        if mode == "file" and allowed_dir is None:
            raise BenchError("--media-url file needs a server whose --allowed-local-media-path "
                             "is known (a managed server); use --media-url data")
        self.mode, self.allowed_dir = mode, allowed_dir

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one instance per run
    def url(self, path: Path, mime: str) -> str:
        if self.mode == "file":
            path = path.resolve()
            if self.allowed_dir not in path.parents:
                raise BenchError(f"media {path}: outside the server's allowed media path "
                                 f"{self.allowed_dir}; use --media-url data")
            return path.as_uri()
        return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}"


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
