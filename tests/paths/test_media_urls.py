"""data: URLs are encoded once per item while they fit the cache; memory stays bounded."""

from __future__ import annotations

import base64
from pathlib import Path

from bench.paths.media_urls import MediaUrls


def test_data_urls_are_cached_within_their_byte_budget(tmp_path: Path, monkeypatch) -> None:
    files = []
    for i in range(4):
        files.append(tmp_path / f"m{i}.bin")
        files[-1].write_bytes(bytes([i]) * 3000)  # 4,000 base64 characters each
    expected = {f: f"data:image/png;base64,{base64.b64encode(f.read_bytes()).decode()}"
                for f in files}
    urls = MediaUrls("data", cache_bytes=9000)  # room for two
    reads = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self.name) or real(self))
    for f in files[:2] * 3:
        assert urls.url(f, "image/png") == expected[f]
    assert reads == ["m0.bin", "m1.bin"]  # each encoded once
    for f in files:
        urls.url(f, "image/png")
    assert len(urls._cache) == 2 and urls._cached <= 9000
    assert list(urls._cache) == files[2:]  # the least recently used went first


def test_preload_encodes_what_fits_before_the_run_reads_anything(tmp_path: Path,
                                                                  monkeypatch) -> None:
    files = []
    for i in range(4):
        files.append(tmp_path / f"m{i}.bin")
        files[-1].write_bytes(bytes([i]) * 3000)
    urls = MediaUrls("data", cache_bytes=9000)
    urls.preload((f, "image/png") for f in files)
    assert list(urls._cache) == files[:2]  # what fits, no eviction churn
    reads = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self.name) or real(self))
    for f in files[:2]:
        urls.url(f, "image/png")
    assert reads == []  # the hot loop reads no file
