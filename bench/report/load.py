"""Find and read the runs a report covers: results, measured records, optional isolation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench import SCHEMA_VERSION
from bench.docio import read_document
from bench.errors import BenchError
from bench.measured.records import read_records
from bench.outputs import ISOLATION_FILE, ISOLATION_KIND, RECORDS_FILE, RESULTS_FILE
from bench.results import read_results
from bench.vocab import MEASURE


@dataclass
class Run:
    """One run as the report sees it."""

    label: str
    dir: Path
    results: dict
    records: list[dict]  # measure phase only
    isolation: dict | None = None

    @property
    def run_id(self) -> str:
        return self.results["run_id"]

    def meta(self) -> dict[str, str]:
        """The run's identifying metadata, as display strings, in a fixed order."""
        m = self.results.get("metadata", {})
        target, machine = m.get("target", {}), m.get("machine", {})
        workload = m.get("workload", {})
        spec = workload.get("spec", {})
        return {
            "run id": self.run_id,
            "vLLM": str(target.get("vllm_version", "?")),
            "model": str(target.get("model", "?")),
            "block size": str(target.get("block_size", "?")),
            "machine": f"{machine.get('cpu', '?')} ×{machine.get('cpu_count', '?')}",
            "date": str(m.get("date", "?")),
            "workload": str(spec.get("name", "?")),
            "spec sha256": str(spec.get("sha256", "?")),
            "seed": str(workload.get("seed", "?")),
        }


def results_path(arg: Path) -> Path:
    """``arg`` itself if it is a file, else ``arg/results.json``."""
    path = Path(arg)
    return path / RESULTS_FILE if path.is_dir() else path


def read_isolation(path: Path) -> dict:
    """An ``isolation.json``; ``BenchError`` naming the file if it is not one."""
    data = read_document(path, ISOLATION_KIND, SCHEMA_VERSION)
    for key in ("cells", "side_channel"):
        if not isinstance(data.get(key, []), list):
            raise BenchError(f"{path}: {key!r} is not a list")
    return data


def load_run(arg: Path, label: str | None = None) -> Run:
    """The run at ``arg`` (a run directory or its ``results.json``)."""
    path = results_path(arg)
    results = read_results(path)
    for key in ("run_id", "passes", "groups"):
        if key not in results:
            raise BenchError(f"{path}: missing {key!r}")
    if not results["passes"]:
        raise BenchError(f"{path}: no passes recorded; nothing to report")
    records_file = path.parent / RECORDS_FILE
    if not records_file.exists():
        raise BenchError(f"{records_file}: missing (it sits next to {path.name})")
    measured = [r for r in read_records(records_file) if r.get("phase") == MEASURE]
    iso_file = path.parent / ISOLATION_FILE
    isolation = read_isolation(iso_file) if iso_file.exists() else None
    return Run(label or results["run_id"], path.parent, results, measured, isolation)


def load_runs(args: list[Path], labels: list[str] | None = None) -> list[Run]:
    """Every run in ``args``, labelled by ``labels`` (one each) or by run id."""
    if not args:
        raise BenchError("no results given")
    if labels and len(labels) != len(args):
        raise BenchError(f"{len(labels)} labels for {len(args)} results; give one each")
    runs = [load_run(a, lab) for a, lab in zip(args, labels or [None] * len(args))]
    seen: dict[str, int] = {}
    for run in runs:  # the same run twice without labels: keep the series apart
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            run.label = f"{run.label} ({seen[run.label]})"
    return runs
