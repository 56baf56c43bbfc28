"""One benchmark run end to end: workload + target -> records.jsonl + results.json.

Records are appended as requests finish; ``results.json`` is written at the end and
also when the run is interrupted or fails, from whatever was recorded.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from pathlib import Path

from rich.console import Console

from bench import aio
from bench.engine.reference import check_modalities
from bench.engine.target import Target
from bench.errors import BenchError
from bench.measured.records import PassLines
from bench.metadata import base_metadata
from bench.outputs import LAYOUTS_FILE, RECORDS_FILE, RESULTS_FILE
from bench.paths import unavailable_paths
from bench.progress import progress_bar
from bench.results import build_results, write_results
from bench.run.passes import Runner
from bench.run.resume import Resume, check_target, prepare
from bench.run.secret import create_secret
from bench.run.settings import RunOptions
from bench.workload import Workload


def run_metadata(target: Target, workload: Workload, opts: RunOptions,
                 design: dict | None = None) -> dict:
    """What a run's results record about it (``design``: its place in an A/B)."""
    meta = workload.metadata
    return {**base_metadata(), **({"ab": design} if design else {}), "target": target.metadata,
            "workload": {"dir": str(workload.dir), "spec": meta["spec"], "seed": meta["seed"],
                         "counts": meta["counts"], "libraries": meta.get("libraries")},
            "options": {k: _json_number(v) for k, v in asdict(opts).items()}}


def _json_number(value: object) -> object:
    """Strict JSON has no infinity: ``inf`` is written as the string ``"inf"``."""
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def run_benchmark(target: Target, workload: Workload, opts: RunOptions, out_dir: Path,
                  run_id: str, console: Console, resume: Resume | None = None,
                  design: dict | None = None) -> dict:
    """Run (or, with ``resume``, continue) and save; return the results dict
    (``interrupted`` or ``stopped`` set if it did not finish). ``design``: the run's place
    in an A/B (:mod:`bench.campaigns.ab`), recorded in its metadata."""
    check_modalities(target.metadata.get("model_info") or {},
                     workload.metadata["counts"]["media"], workload.metadata["spec"]["name"])
    out_dir.mkdir(parents=True, exist_ok=True)
    records_path, layouts_path = out_dir / RECORDS_FILE, out_dir / LAYOUTS_FILE
    if resume is None:
        if records_path.exists() and records_path.stat().st_size:
            raise BenchError(f"--out {out_dir}: already holds the records of a run; "
                             "choose a new directory (or continue it with --resume)")
        metadata = run_metadata(target, workload, opts, design)
        secret = create_secret(out_dir)
    else:
        check_target(resume, target.metadata)
        prepare(resume)
        metadata = {**resume.metadata, "resumed": [*resume.metadata.get("resumed", []), {
            **resume.history, "deadline_s": opts.deadline_s,
            "target": {k: target.metadata.get(k) for k in ("managed", "server_url",
                                                           "vllm_version")}}]}
        secret = resume.secret
        console.print(f"resuming {run_id}: {resume.history['records_kept']} records kept, "
                      f"{resume.history['records_resent']} to send again, "
                      f"{len(resume.passes)} passes finished")
    unavailable = unavailable_paths(opts.paths, target.metadata)
    for path, why in unavailable.items():
        console.print(f"[yellow]path {path}: n/a on this server ({why})[/]")
    opts = replace(opts, paths=[p for p in opts.paths if p not in unavailable])

    def save(passes: list, interrupted: bool, stopped: str | None) -> dict:
        results = build_results(run_id, metadata, passes, PassLines(records_path),
                                PassLines(layouts_path), interrupted, unavailable, stopped)
        write_results(out_dir / RESULTS_FILE, results)
        return results

    # Written first: a run killed outright still leaves results that say so (and --resume).
    save(list(resume.passes.values()) if resume else [], True, None)
    n = workload.metadata["counts"]["requests"]
    per_pass = n + min(opts.warmup, n) + (n if opts.prime else 0)
    total = per_pass * len(opts.paths) * len(opts.salt_modes) * opts.repeat
    with progress_bar(console, "requests", total) as progress:
        runner = Runner(target, workload, opts, out_dir, run_id, secret, progress, resume)
        interrupted = True
        try:
            aio.run(runner.run())
            interrupted = False
        finally:
            results = save(runner.passes, interrupted, runner.stopped)
            measured = sum(p["completed"] + p["failed"] for p in results["passes"])
            kept = f"{measured} measured records kept"
            if interrupted:
                console.print(f"[yellow]run interrupted; {kept} in {out_dir} "
                              f"(continue it with --resume {out_dir})[/]")
            elif runner.stopped:
                console.print(f"[red]run stopped early: {runner.stopped}; {kept} in "
                              f"{out_dir} (continue it with --resume {out_dir})[/]")
    return results
