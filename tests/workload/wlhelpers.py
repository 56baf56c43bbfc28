"""Readers for generated manifests, independent of bench.workload.manifest."""

from __future__ import annotations

import json
from pathlib import Path


def read_requests(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "requests.jsonl").open()]


def read_media(directory: Path) -> dict[str, dict]:
    return {m["id"]: m for m in map(json.loads, (directory / "media.jsonl").open())}
