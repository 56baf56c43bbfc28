"""The on-disk workload: ``workload.json``, ``requests.jsonl``, ``media.jsonl`` and ``media/``.

Lines are checked against :data:`WORKLOAD_SCHEMA` on read; errors name the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.docio import read_document, write_text
from bench.errors import BenchError
from bench.vocab import EXPECTATIONS

KIND = "saltbench-workload"
#: Version of the workload files (2: ``salt_ref`` names a salt reference, never a salt).
VERSION = 2
META_FILE = "workload.json"
REQUESTS_FILE = "requests.jsonl"
MEDIA_FILE = "media.jsonl"
MEDIA_DIR = "media"

_OPT_STR = (str, type(None))
#: Required keys and their JSON types, per line kind.
WORKLOAD_SCHEMA: dict[str, dict[str, tuple[type, ...]]] = {
    "request": {
        "id": (str,), "case": (str,), "tenant": (str,), "salt_ref": _OPT_STR, "session": _OPT_STR,
        "turn": (int,), "arrival_s": (int, float, type(None)), "messages": (list,),
        "modalities": (list,), "max_tokens": (int,), "oracle": (dict,),
    },
    "oracle": {
        "prefix_of": _OPT_STR, "shared_messages": (int,), "expect": (str,), "reason": (str,),
    },
    "message": {"role": (str,), "content": (list,)},
    "media": {
        "id": (str,), "modality": (str,), "path": (str,), "mime": (str,), "sha256": (str,),
        "bytes": (int,), "content_id": (str,), "variant": (bool,), "params": (dict,),
    },
}
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class MediaItem:
    """One media file of a workload, with its absolute path."""

    id: str
    modality: str
    path: Path
    mime: str
    sha256: str
    bytes: int
    content_id: str
    variant: bool
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """A generated workload: metadata, media index, and requests streamed from disk."""

    dir: Path
    metadata: dict[str, Any]
    media: dict[str, MediaItem]

    def requests(self) -> Iterator[dict[str, Any]]:
        """Request dicts in file (arrival) order, validated line by line."""
        return iter_lines(self.dir / REQUESTS_FILE, "request")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.requests()


def dump(obj: Any) -> str:
    """One canonical JSONL line."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def write_metadata(directory: Path, meta: dict[str, Any]) -> None:
    write_text(directory / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")


def workload_dir(path: str | Path) -> Path:
    """The workload directory for a directory or any manifest file inside it."""
    path = Path(path)
    directory = path if path.is_dir() else path.parent
    if not (directory / META_FILE).is_file():
        raise BenchError(f"{path}: not a workload (no {META_FILE}); run `generate` first")
    return directory


def read_metadata(directory: Path) -> dict[str, Any]:
    return read_document(directory / META_FILE, KIND, VERSION)


def load_workload(path: str | Path) -> Workload:
    """Open a workload directory (or a manifest file in it) for running."""
    directory = workload_dir(path).resolve()
    meta = read_metadata(directory)
    media = {}
    for line in iter_lines(directory / MEDIA_FILE, "media"):
        media[line["id"]] = MediaItem(**{**line, "path": directory / line["path"]})
    return Workload(directory, meta, media)


def iter_lines(file: Path, kind: str) -> Iterator[dict[str, Any]]:
    """Decode and validate a JSONL file line by line."""
    try:
        handle = open(file, encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"{file}: cannot open: {exc.strerror}") from None
    with handle:
        for lineno, text in enumerate(handle, 1):
            try:
                obj = orjson.loads(text)
            except ValueError as exc:
                raise BenchError(f"{file}:{lineno}: not JSON: {exc}") from None
            problem = check(kind, obj)
            if problem:
                raise BenchError(f"{file}:{lineno}: {problem}")
            yield obj


def check(kind: str, obj: Any) -> str | None:
    """What is wrong with one ``request`` or ``media`` line, or ``None``."""
    problem = _keys(kind, obj, "")
    if problem or kind != "request":
        return problem
    problem = _keys("oracle", obj["oracle"], "oracle.")
    if problem:
        return problem
    if obj["oracle"]["expect"] not in EXPECTATIONS:
        return f"oracle.expect: must be one of {list(EXPECTATIONS)}, got {obj['oracle']['expect']!r}"
    for i, message in enumerate(obj["messages"]):
        problem = _keys("message", message, f"messages[{i}].")
        if problem:
            return problem
        if message["role"] not in ROLES:
            return f"messages[{i}].role: must be one of {list(ROLES)}, got {message['role']!r}"
        for j, part in enumerate(message["content"]):
            key = "text" if isinstance(part, dict) and part.get("type") == "text" else "media"
            if not isinstance(part, dict) or not isinstance(part.get(key), str):
                return f"messages[{i}].content[{j}]: must be a text or media part, got {part!r}"
    return None


def _keys(kind: str, obj: Any, where: str) -> str | None:
    if not isinstance(obj, dict):
        return f"{where or kind}: must be an object, got {type(obj).__name__}"
    schema = WORKLOAD_SCHEMA[kind]
    for key, types in schema.items():
        if key not in obj:
            return f"{where}{key}: missing"
        value = obj[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"{where}{key}: wrong type {type(value).__name__}"
    extra = sorted(set(obj) - set(schema))
    return f"{where}{extra[0]}: unknown key" if extra else None
