"""Atomic writes: an interrupted write keeps the old file and leaves no temporary behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from bench.docio import replacing, write_json
from bench.media import image


def test_interrupted_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_json(path, {"version": 1})
    with pytest.raises(RuntimeError, match="killed"), replacing(path) as tmp:
        tmp.write_text('{"version": 2, "unfin')
        raise RuntimeError("killed")
    assert json.loads(path.read_text()) == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_temporary_keeps_the_suffix_for_format_sniffing_writers(tmp_path: Path) -> None:
    with replacing(tmp_path / "chart.svg") as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".svg" and tmp.name.startswith(".")
        tmp.write_text("<svg/>")
    assert [p.name for p in tmp_path.iterdir()] == ["chart.svg"]


def test_interrupted_media_write_keeps_the_old_file(tmp_path: Path, monkeypatch) -> None:
    args = {"kind": "noise", "width": 16, "height": 16, "fmt": "png", "quality": 90}
    first = image.write(tmp_path / "img", seed=1, **args)
    before = first.path.read_bytes()

    def broken_save(self: Image.Image, fp: Path, *_args, **_kwargs) -> None:
        Path(fp).write_bytes(before[:20])
        raise OSError("No space left on device")

    monkeypatch.setattr(Image.Image, "save", broken_save)
    with pytest.raises(OSError, match="No space"):
        image.write(tmp_path / "img", seed=2, **args)
    assert first.path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [first.path]
