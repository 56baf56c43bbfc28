"""One benchmark run end to end: workload + target -> records.jsonl + results.json.

Records are appended as requests finish; ``results.json`` is written at the end and
also when the run is interrupted or fails, from whatever was recorded.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import asdict, replace
from pathlib import Path

from rich.console import Console

from bench.engine.target import Target
from bench.errors import BenchError
from bench.metadata import base_metadata
from bench.outputs import LAYOUTS_FILE, RECORDS_FILE, RESULTS_FILE
from bench.paths import unavailable_paths
from bench.progress import progress_bar
from bench.results import build_results, write_results
from bench.run.passes import Runner, RunOptions
from bench.run.records import read_records
from bench.workload import Workload


def run_metadata(target: Target, workload: Workload, opts: RunOptions) -> dict:
    meta = workload.metadata
    return {**base_metadata(), "target": target.metadata,
            "workload": {"dir": str(workload.dir), "spec": meta["spec"], "seed": meta["seed"],
                         "counts": meta["counts"], "libraries": meta.get("libraries")},
            "options": {k: _json_number(v) for k, v in asdict(opts).items()}}


def _json_number(value: object) -> object:
    """Strict JSON has no infinity: ``inf`` is written as the string ``"inf"``."""
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def run_benchmark(target: Target, workload: Workload, opts: RunOptions, out_dir: Path,
                  run_id: str, console: Console) -> dict:
    """Run and save; return the results dict (``interrupted`` set if it did not finish)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    records_path = out_dir / RECORDS_FILE
    if records_path.exists() and records_path.stat().st_size:
        raise BenchError(f"--out {out_dir}: already holds the records of a run; "
                         "choose a new directory")
    metadata = run_metadata(target, workload, opts)
    unavailable = unavailable_paths(opts.paths, target.metadata)
    for path, why in unavailable.items():
        console.print(f"[yellow]path {path}: n/a on this server ({why})[/]")
    opts = replace(opts, paths=[p for p in opts.paths if p not in unavailable])
    n = workload.metadata["counts"]["requests"]
    per_pass = n + min(opts.warmup, n) + (n if opts.prime else 0)
    total = per_pass * len(opts.paths) * len(opts.salt_modes) * opts.repeat
    with progress_bar(console, "requests", total) as progress:
        runner = Runner(target, workload, opts, records_path, out_dir / LAYOUTS_FILE, run_id,
                        progress)
        interrupted = True
        try:
            asyncio.run(runner.run())
            interrupted = False
        finally:
            records = read_records(records_path) if records_path.exists() else []
            layouts_path = out_dir / LAYOUTS_FILE
            layouts = read_records(layouts_path) if layouts_path.exists() else []
            results = build_results(run_id, metadata, runner.passes, records, layouts,
                                    interrupted, unavailable)
            write_results(out_dir / RESULTS_FILE, results)
            if interrupted:
                console.print(f"[yellow]run interrupted; {len(records)} records kept in "
                              f"{out_dir}[/]")
    return results
