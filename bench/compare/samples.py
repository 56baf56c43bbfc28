"""The runs of one side of a comparison as it needs them: per run its results, and per path
x modality x salt mode the measured requests of each repetition as columns (reduced to
one value of a metric per repetition), each repetition's per-pass values (for metrics
only a pass has) and the server start it ran on.

A side is one run directory or a directory of run directories (a set, ordered by name),
each made on its own server start. A resumed run is one start: its segments may share a
pass, so they cannot be told apart as starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench import SCHEMA_VERSION
from bench.compare.comparability import describe, differences
from bench.docio import read_document
from bench.errors import BenchError
from bench.measured.records import Record, read_records
from bench.outputs import ISOLATION_FILE, ISOLATION_KIND, RECORDS_FILE, RESULTS_FILE
from bench.registry import Metric
from bench.results import GROUP_KEYS, read_results
from bench.verdicts.isolation import worst
from bench.vocab import CHANNEL_VERDICTS, CONTENT, MEASURE

GroupKey = tuple[str, str, str]  # path, modality, salt mode


@dataclass
class Group:
    """One path x modality x salt mode of a side."""

    #: Per repetition: per-request columns (successful measured requests only).
    requests: list[dict[str, np.ndarray]] = field(default_factory=list)
    #: Per repetition: the group's row of ``results["groups"]`` (per-pass metrics).
    rows: list[dict] = field(default_factory=list)
    #: Per repetition: its server start (the index of its run in the side, or its start
    #: pair in an A/B).
    starts: list[int] = field(default_factory=list)
    #: Per repetition: the request ids of ``requests``, in order.
    ids: list[list[str]] = field(default_factory=list)
    #: Per repetition: where it ran, (start, block, repetition); the same on both sides of
    #: an A/B for the same requests (:mod:`bench.compare.paired` pairs by it).
    units: list[tuple[int, int, int]] = field(default_factory=list)
    #: Values computed from the group (:func:`bench.compare.intervals.repetition_values`).
    memo: dict = field(default_factory=dict, repr=False, compare=False)


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

    @property
    def ab(self) -> dict | None:
        """The run's place in an A/B (:mod:`bench.campaigns.ab`), if it ran in one."""
        return self.results["metadata"].get("ab")


@dataclass
class Side:
    """One side of a comparison: its runs (one server start each) and their groups pooled,
    each repetition tagged with its run's index."""

    dir: Path
    runs: list[RunSamples]
    groups: dict[GroupKey, Group]

    @classmethod
    def of(cls, runs: list[RunSamples], where: Path | None = None) -> Side:
        groups: dict[GroupKey, Group] = {}
        for index, run in enumerate(runs):
            start, block = (run.ab["start"], run.ab["block"]) if run.ab else (index, 0)
            for key, g in run.groups.items():
                pooled = groups.setdefault(key, Group())
                pooled.requests += g.requests
                pooled.rows += g.rows
                pooled.ids += g.ids
                pooled.starts += [start] * len(g.rows)
                pooled.units += [(start, block, row.get("repetition", 0)) for row in g.rows]
        return cls(where or runs[0].dir, runs, groups)

    def measured(self, metric: Metric) -> bool:
        """Whether the side has ``metric`` at all: per-request metrics always; a per-pass
        one where a row has it (goodput: only runs with objectives)."""
        return metric.per_request or any(row.get(metric.name) is not None
                                         for g in self.groups.values() for row in g.rows)

    @property
    def ab_id(self) -> str | None:
        """The A/B every run of the side belongs to (None: not all of one A/B)."""
        ids = {(r.ab or {}).get("id") for r in self.runs}
        return ids.pop() if len(ids) == 1 else None

    @property
    def results(self) -> dict:
        """The first run's results (the runs of a side are comparable to each other)."""
        return self.runs[0].results

    @property
    def label(self) -> str:
        if len(self.runs) == 1:
            return f"{self.runs[0].label}: 1 run (server start)"
        version = self.results["metadata"].get("target", {}).get("vllm_version")
        return (f"{len(self.runs)} runs (server starts)" + (f" of vLLM {version}" if version else "")
                + f": {', '.join(r.results['run_id'] for r in self.runs)}")

    @property
    def isolation(self) -> dict | None:
        """The runs' isolation results merged: per cell (and routed cell, uuid probe) the
        worst verdict across the runs that probed it (LEAK > ERROR > UNDER-HIT > ISOLATED;
        a uuid probe's media-content verdict by its own precedence;
        ``n/a`` only when no run judged it), its reason naming the run in a set; complete
        when every run's is; None when no run has ``isolation.json``."""
        probed = [r for r in self.runs if r.isolation is not None]
        if not probed:
            return None
        if len(self.runs) == 1:
            return probed[0].isolation
        merged: dict = {"complete": all(r.isolation["complete"] for r in probed)}
        for part, key in (("cells", ("path", "modality", "replica")),
                          ("routed", ("path", "modality")),
                          ("uuid_probe", ("path", "modality", "replica"))):
            found: dict[tuple, list[dict]] = {}
            for run in probed:
                for cell in run.isolation.get(part, []):
                    reason = cell.get("reason")
                    found.setdefault(tuple(cell.get(k) for k in key), []).append(
                        {**cell, "reason": f"{run.dir.name}: {reason}" if reason else None})
            merged[part] = [next((c for c in cells if c["verdict"] == bad), cells[0])
                            for cells in found.values()
                            for bad in [worst(c["verdict"] for c in cells)]]
            if part == "uuid_probe":  # the media-content verdict merges on its own
                for entry, cells in zip(merged[part], found.values()):
                    contents = [c for c in cells if "content" in c]
                    bad = next((v for v in CHANNEL_VERDICTS[CONTENT]
                                if any(c["content"] == v for c in contents)), None)
                    if bad is not None:
                        pick = next(c for c in contents if c["content"] == bad)
                        entry.update(content=bad, content_reason=pick.get("content_reason"))
        return merged

    @property
    def unavailable(self) -> dict[str, str]:
        """Paths a run of the side could not serve, and why."""
        out: dict[str, str] = {}
        for run in self.runs:
            out.update(run.results.get("unavailable", {}))
        return out


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
        done = [r for r in by_rep.get((key, row.get("repetition", 0)), []) if r["ok"]]
        group.requests.append(request_columns(done))
        group.ids.append([r["request_id"] for r in done])
        group.starts.append(0)
    return RunSamples(run_dir, results, isolation, groups)


def run_dirs(side: Path) -> list[Path]:
    """A run directory alone, or the run directories of a set (by name); a BenchError
    naming ``side`` when it is neither."""
    side = Path(side)
    if (side / RESULTS_FILE).exists():
        return [side]
    if not side.is_dir():
        raise BenchError(f"{side}: no such directory (a run directory or a directory of runs)")
    subdirs = sorted(d for d in side.iterdir() if d.is_dir())
    if not subdirs:
        raise BenchError(f"{side}: no {RESULTS_FILE} and no run directories in it (a side is a "
                         f"run directory or a directory of run directories)")
    lacking = [d.name for d in subdirs if not (d / RESULTS_FILE).exists()]
    if lacking:
        raise BenchError(f"{side}: neither a run directory (no {RESULTS_FILE}) nor a set of runs: "
                         f"{', '.join(lacking)} has no {RESULTS_FILE}")
    return subdirs


def load_side(side: Path | list[Path]) -> Side:
    """A run directory, a directory of runs, or a list of run directories, as one side;
    the runs must measure the same thing (only run ids, dates and ports may differ) and
    be distinct runs."""
    dirs = run_dirs(side) if isinstance(side, Path) else side
    where = side if isinstance(side, Path) else Path(", ".join(map(str, side)))
    runs = [load_run(d) for d in dirs]
    seen: dict[str, Path] = {}
    for run in runs:
        if run.results["run_id"] in seen:
            raise BenchError(f"{where}: {run.dir} and {seen[run.results['run_id']]} are the same "
                             f"run ({run.results['run_id']}); each run of a set is a server start")
        seen[run.results["run_id"]] = run.dir
        found = differences(runs[0].results["metadata"], run.results["metadata"])
        if found:
            raise BenchError(f"{where}: the runs of a set must measure the same thing; {run.dir} "
                             f"differs from {runs[0].dir}:\n" + describe(found))
    return Side.of(runs, where)


def paired(base: Side, new: Side) -> bool:
    """Whether the two sides are the sides of one A/B (their runs pair by unit)."""
    return base.ab_id is not None and base.ab_id == new.ab_id
