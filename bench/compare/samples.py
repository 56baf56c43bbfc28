"""A finished run as a comparison needs it: its results, and per path x modality x salt
mode the measured requests of each repetition as columns (for a bootstrap over requests)
and each repetition's per-pass values (for metrics only a pass has)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench import SCHEMA_VERSION
from bench.docio import read_document
from bench.errors import BenchError
from bench.outputs import ISOLATION_FILE, ISOLATION_KIND, RECORDS_FILE, RESULTS_FILE
from bench.results import GROUP_KEYS, read_results
from bench.run.records import Record, read_records
from bench.vocab import MEASURE

GroupKey = tuple[str, str, str]  # path, modality, salt mode


@dataclass
class Group:
    """One path x modality x salt mode of a run."""

    #: Per repetition: per-request columns (successful measured requests only).
    requests: list[dict[str, np.ndarray]] = field(default_factory=list)
    #: Per repetition: the group's row of ``results["groups"]`` (per-pass metrics).
    rows: list[dict] = field(default_factory=list)


@dataclass
class RunSamples:
    dir: Path
    results: dict
    isolation: dict | None
    groups: dict[GroupKey, Group]

    @property
    def label(self) -> str:
        version = self.results["metadata"].get("target", {}).get("vllm_version")
        return f"{self.results['run_id']}" + (f" (vLLM {version})" if version else "")


def request_columns(records: list[Record]) -> dict[str, np.ndarray]:
    """Per-request values of successful requests; a value a request lacks is NaN."""
    done = [r for r in records if r["ok"]]

    def col(values: list) -> np.ndarray:
        return np.asarray([np.nan if v is None else v for v in values], dtype=float)

    outs = [r.get("output_tokens") or 0 for r in done]
    return {
        "ttft_ms": col([r["ttft_ms"] for r in done]),
        "e2el_ms": col([r["e2el_ms"] for r in done]),
        "tpot_ms": col([(r["e2el_ms"] - r["ttft_ms"]) / (n - 1) if n > 1 else None
                        for r, n in zip(done, outs)]),
        "itl_sum_ms": col([sum(r["itl_ms"]) for r in done]),
        "itl_count": col([len(r["itl_ms"]) for r in done]),
        "cached_tokens": col([r.get("cached_tokens") for r in done]),
        "prompt_tokens": col([r.get("prompt_tokens") for r in done]),
    }


def load_run(run_dir: Path) -> RunSamples:
    """Read ``results.json``, ``records.jsonl`` and (if present) ``isolation.json``."""
    run_dir = Path(run_dir)
    if not (run_dir / RESULTS_FILE).exists():
        raise BenchError(f"{run_dir}: no {RESULTS_FILE} (not a saltbench run directory)")
    results = read_results(run_dir / RESULTS_FILE)
    if not (run_dir / RECORDS_FILE).exists():
        raise BenchError(f"{run_dir}: no {RECORDS_FILE}: a comparison needs every request")
    records = read_records(run_dir / RECORDS_FILE)
    iso_path = run_dir / ISOLATION_FILE
    isolation = read_document(iso_path, ISOLATION_KIND, SCHEMA_VERSION) if iso_path.exists() else None
    repetition = {p["index"]: p.get("repetition", 0) for p in results["passes"]}
    groups: dict[GroupKey, Group] = {}
    by_rep: dict[tuple[GroupKey, int], list[Record]] = {}
    for r in records:
        if r["phase"] == MEASURE and r["pass"] in repetition:  # type: ignore[typeddict-item]
            key = (r["path"], r["modality"], r["salt_mode"])
            by_rep.setdefault((key, repetition[r["pass"]]), []).append(r)  # type: ignore[typeddict-item]
    for row in results["groups"]:
        key = tuple(row[k] for k in GROUP_KEYS)
        group = groups.setdefault(key, Group())  # type: ignore[arg-type]
        group.rows.append(row)
        group.requests.append(request_columns(by_rep.get((key, row.get("repetition", 0)), [])))
    return RunSamples(run_dir, results, isolation, groups)
