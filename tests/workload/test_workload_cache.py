"""The workload cache: damaged media found by sha256 and rebuilt; concurrent generators
(real processes) serialised by the lock beside the workload directory."""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
from pathlib import Path

import pytest
from cliproc import saltbench_process

from bench.cachedirs import locked
from bench.errors import BenchError
from bench.media import file_problem
from bench.workload import Workload, load_workload, open_workload
from bench.workload.build import generate


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _assert_intact(workload: Workload) -> None:
    assert workload.media
    assert all(file_problem(i.path, i.sha256, i.bytes) is None for i in workload.media.values())


def test_damaged_media_are_rebuilt_and_named(tmp_path: Path, caplog) -> None:
    out = generate("smoke", out=tmp_path / "wl")
    flipped, truncated, removed = [i.path for i in load_workload(out).media.values()][:3]
    original = {p: p.read_bytes() for p in (flipped, truncated, removed)}
    _flip_a_byte(flipped)
    truncated.write_bytes(original[truncated][:100])
    removed.unlink()
    with caplog.at_level(logging.WARNING, logger="bench.workload.build"):
        assert generate("smoke", out=out) == out
    for path, problem in ((flipped, "sha256 differs"), (truncated, "100 bytes"),
                          (removed, "missing")):
        assert f"{path}: damaged media ({problem}" in caplog.text
        assert path.read_bytes() == original[path]
    _assert_intact(load_workload(out))
    assert not [p.name for p in (out / "media").iterdir() if p.name.startswith(".")]


def test_unrepairable_workload_is_generated_again(tmp_path: Path, monkeypatch, caplog) -> None:
    out = generate("smoke", out=tmp_path / "wl")
    item = next(iter(load_workload(out).media.values()))
    _flip_a_byte(item.path)
    # Other library versions: re-encoding gives other bytes, so the manifest no longer holds.
    monkeypatch.setattr("bench.workload.build.encode",
                        lambda spec, out, media_id: item.path.write_bytes(b"other bytes"))
    with caplog.at_level(logging.WARNING, logger="bench.workload.build"):
        generate("smoke", out=out)
    assert "differs from the manifest; generating the workload again" in caplog.text
    _assert_intact(load_workload(out))
    (out / "media.jsonl").write_text("not json\n")
    generate("smoke", out=out)
    _assert_intact(load_workload(out))


def test_given_directory_with_damaged_media_is_refused(tmp_path: Path) -> None:
    out = generate("smoke", out=tmp_path / "wl")
    item = next(iter(load_workload(out).media.values()))
    _flip_a_byte(item.path)
    with pytest.raises(BenchError, match=re.escape(f"{item.path}: sha256 differs")):
        open_workload(str(out))


def test_concurrent_generators_share_one_workload(tmp_path: Path) -> None:
    out = tmp_path / "wl"
    args = ("generate", "mixed-tenants", "--requests", "1000", "--out", str(out))
    with saltbench_process(*args) as first, saltbench_process(*args) as second:
        outputs = [p.communicate(timeout=300) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    assert [stdout.strip() for stdout, _ in outputs] == [str(out)] * 2
    workload = load_workload(out)
    _assert_intact(workload)
    assert sum(1 for _ in workload.requests()) == 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wl", "wl.lock"]


def test_generator_waits_for_the_lock(tmp_path: Path) -> None:
    out = tmp_path / "wl"
    with contextlib.ExitStack() as held:
        held.enter_context(locked(out))
        with saltbench_process("generate", "smoke", "--out", str(out)) as proc:
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=3)
            assert not out.exists()
            held.close()
            stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    _assert_intact(load_workload(out))
