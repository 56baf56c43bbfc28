"""Versioned JSON documents and atomic files: a reader never sees half a file.

Every document saltbench writes carries ``kind`` and ``schema_version``;
:func:`read_document` checks both and names the file in any error.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.errors import BenchError


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``; on success it replaces ``path`` in one step.

    The temporary name keeps ``path``'s suffix, for writers that pick a format by it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def replace_dir(built: Path, path: Path) -> None:
    """Move the directory ``built`` to ``path``, an old ``path`` first renamed aside and removed:
    a reader finds the old directory, the new one or (between the two renames) none, never
    a half-written one."""
    old = path.with_name(f".{path.name}.{os.getpid()}.old")
    if path.exists():
        path.rename(old)
    try:
        built.rename(path)
    finally:
        shutil.rmtree(old, ignore_errors=True)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    write_text(path, json.dumps(obj, indent=2, default=str) + "\n")


def read_document(path: Path, kind: str, version: int) -> dict:
    """A JSON object of ``kind`` at ``version``; a BenchError naming the file otherwise."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchError(f"{path}: not a readable {kind} file: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        found = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise BenchError(f"{path}: not a {kind} file (kind={found!r})")
    if data.get("schema_version") != version:
        raise BenchError(f"{path}: schema_version {data.get('schema_version')!r} is not "
                         f"{version}; regenerate it with this saltbench")
    return data
