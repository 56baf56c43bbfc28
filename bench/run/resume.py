"""``run --resume DIR``: continue an interrupted or stopped run from its own files.

What the run directory holds decides what is left: ``results.json`` (written when the run
starts) gives the run id, metadata and options; ``passes.jsonl`` the passes that finished;
``records.jsonl`` the requests that did. Requests that failed in transit (never sent, cut
off, connection refused or reset, timed out: the server may never have served them) are
dropped from the records and sent again; every other record is kept and never repeated.
The salts are the run's own (:mod:`bench.run.secret`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

from bench.docio import write_text
from bench.errors import BenchError
from bench.measured.records import PassInfo, read_records
from bench.outputs import LAYOUTS_FILE, PASSES_FILE, RECORDS_FILE, RESULTS_FILE
from bench.results import read_results
from bench.run.secret import read_secret
from bench.run.settings import RunOptions
from bench.vocab import MEASURE, Failure

#: Failures after which a request is sent again: it may never have reached the server.
RESENT = frozenset({Failure.NOT_SENT, Failure.DEADLINE, Failure.CONNECT, Failure.RESET,
                    Failure.TIMEOUT_CONNECT, Failure.TIMEOUT_FIRST_BYTE,
                    Failure.TIMEOUT_TOTAL})
#: Target fields that must not change between the segments of one run.
SAME_TARGET = ("vllm_version", "model", "block_size")


@dataclass
class Resume:
    """What a resumed run continues from."""

    dir: Path
    run_id: str
    metadata: dict
    options: RunOptions
    secret: str
    segment: int  # this segment's number (the first run was 0)
    done: set[tuple[int, str, str]] = field(default_factory=set)  # (pass, phase, request id)
    passes: dict[int, PassInfo] = field(default_factory=dict)  # finished passes
    spans: dict[int, float] = field(default_factory=dict)  # measured s of unfinished passes
    seq: int = 0  # the last record's seq
    clock_s: float = 0.0  # the latest end_s recorded (the new segment's clock starts after)
    history: dict = field(default_factory=dict)  # this segment's entry in metadata.resumed


def load_resume(run_dir: Path, deadline_s: float | None) -> Resume:
    """Read what ``run_dir`` holds; a BenchError naming the file when it cannot go on."""
    results_path = run_dir / RESULTS_FILE
    if not results_path.exists():
        raise BenchError(f"--resume {run_dir}: no {RESULTS_FILE}; not a saltbench run directory")
    results = read_results(results_path)
    if not results["interrupted"] and not results.get("stopped"):
        raise BenchError(f"--resume {run_dir}: the run finished; nothing to resume")
    stored = results["metadata"]["options"]
    names = {f.name for f in dataclasses.fields(RunOptions)}
    if unknown := sorted(set(stored) - names):
        raise BenchError(f"{results_path}: options {', '.join(unknown)} unknown to this saltbench")
    options = RunOptions(**{k: float(v) if v == "inf" else v for k, v in stored.items()})
    options.drop_salt_on = tuple(options.drop_salt_on)
    options.deadline_s = deadline_s
    earlier = results["metadata"].get("resumed", [])
    return Resume(run_dir, results["run_id"], results["metadata"], options,
                  read_secret(run_dir), segment=len(earlier) + 1)


def check_target(resume: Resume, target: dict) -> None:
    """The server must be the same engine, model and block size as the run's."""
    recorded = resume.metadata["target"]
    for key in SAME_TARGET:
        if recorded.get(key) != target.get(key):
            raise BenchError(f"--resume {resume.dir}: the run used {key} {recorded.get(key)!r}, "
                             f"this server has {target.get(key)!r}")


def prepare(resume: Resume) -> None:
    """Drop the records to send again (and layouts of unfinished passes), atomically, and
    note what is done."""
    records_path, layouts_path = resume.dir / RECORDS_FILE, resume.dir / LAYOUTS_FILE
    passes_path = resume.dir / PASSES_FILE
    records = read_records(records_path) if records_path.exists() else []
    finished = read_records(passes_path) if passes_path.exists() else []
    resume.passes = {p["index"]: PassInfo(**p) for p in finished}
    kept = [r for r in records if r["ok"] or r.get("failure") not in RESENT]
    _rewrite(records_path, kept)
    if layouts_path.exists():
        _rewrite(layouts_path, [x for x in read_records(layouts_path)
                                if x["pass"] in resume.passes])  # type: ignore[typeddict-item]
    resume.done = {(r["pass"], r["phase"], r["request_id"]) for r in kept}  # type: ignore[typeddict-item]
    for index in {r["pass"] for r in kept} - set(resume.passes):  # type: ignore[typeddict-item]
        measured = [r for r in kept if r["pass"] == index and r["phase"] == MEASURE]  # type: ignore[typeddict-item]
        if measured:
            resume.spans[index] = max(r["end_s"] for r in measured) - min(
                r["start_s"] for r in measured)
    resume.seq = max((r["seq"] for r in kept), default=0)
    resume.clock_s = max((r["end_s"] for r in kept), default=0.0)
    resume.history = {"segment": resume.segment,
                      "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                      "records_kept": len(kept), "records_resent": len(records) - len(kept),
                      "passes_finished": len(resume.passes)}


def _rewrite(path: Path, lines: list) -> None:
    write_text(path, "".join(json.dumps(x) + "\n" for x in lines))
