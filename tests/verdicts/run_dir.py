"""A run directory made of hand-written records and layouts, judged by the real results
code (:func:`bench.results.build_results`), as ``run`` and ``--resume`` judge a run."""

from __future__ import annotations

from pathlib import Path

import orjson

from bench.measured.records import PassInfo, PassLines
from bench.outputs import LAYOUTS_FILE, RECORDS_FILE
from bench.results import build_results

#: What a measured record needs besides its test's fields.
TIMINGS = {"e2el_ms": 20.0, "itl_ms": [], "itl_token_ms": [], "output_tokens": 1,
           "failure": None, "error": None}


def write_lines(path: Path, lines: list[dict]) -> None:
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def build(tmp_path: Path, records: list[dict], layouts: list[dict], block_size: int,
          kv_capacity_blocks: int | None = None, *, options: dict | None = None,
          replicas: dict | None = None) -> dict:
    """The results of ``records`` and ``layouts`` (each with its ``pass``), written to
    ``tmp_path`` as a run writes them; one pass row per pass (``replicas``: each pass's
    ``PassInfo.replicas``)."""
    write_lines(tmp_path / RECORDS_FILE, [{**TIMINGS, **r} for r in records])
    write_lines(tmp_path / LAYOUTS_FILE, layouts)
    first = {r["pass"]: r for r in reversed(records)}
    passes = [PassInfo(i, r["path"], r["salt_mode"], f"tag{i}", duration_s=1.0,
                       replicas=replicas or {}) for i, r in sorted(first.items())]
    metadata = {"target": {"block_size": block_size,
                           "cache_config": {"num_gpu_blocks": kv_capacity_blocks}},
                "options": options or {}}
    return build_results("test-run", metadata, passes, PassLines(tmp_path / RECORDS_FILE),
                         PassLines(tmp_path / LAYOUTS_FILE), interrupted=False)
