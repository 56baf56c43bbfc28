"""One benchmark run end to end: workload + target -> records.jsonl + results.json.

Records are appended as requests finish; ``results.json`` is written at the end and
also when the run is interrupted or fails, from whatever was recorded.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

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
from bench.run.lockstep import Lockstep
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


class RunSession:
    """One run's set-up around its runner: checks, metadata, secret, ``results.json``
    written first (a run killed outright still says so) and again whatever happens."""

    def __init__(self, target: Target, workload: Workload, opts: RunOptions, out_dir: Path,
                 run_id: str, console: Console, resume: Resume | None = None,
                 design: dict | None = None) -> None:
        check_modalities(target.metadata.get("model_info") or {},
                         workload.metadata["counts"]["media"], workload.metadata["spec"]["name"])
        out_dir.mkdir(parents=True, exist_ok=True)
        self.records_path, self.layouts_path = out_dir / RECORDS_FILE, out_dir / LAYOUTS_FILE
        if resume is None:
            if self.records_path.exists() and self.records_path.stat().st_size:
                raise BenchError(f"--out {out_dir}: already holds the records of a run; "
                                 "choose a new directory (or continue it with --resume)")
            self.metadata = run_metadata(target, workload, opts, design)
            self.secret = create_secret(out_dir)
        else:
            check_target(resume, target.metadata)
            prepare(resume)
            self.metadata = {**resume.metadata, "resumed": [
                *resume.metadata.get("resumed", []), {
                    **resume.history, "deadline_s": opts.deadline_s,
                    "target": {k: target.metadata.get(k) for k in ("managed", "server_url",
                                                                   "vllm_version")}}]}
            self.secret = resume.secret
            console.print(f"resuming {run_id}: {resume.history['records_kept']} records kept, "
                          f"{resume.history['records_resent']} to send again, "
                          f"{len(resume.passes)} passes finished")
        self.unavailable = unavailable_paths(opts.paths, target.metadata)
        for path, why in self.unavailable.items():
            console.print(f"[yellow]path {path}: n/a on this server ({why})[/]")
        self.opts = replace(opts, paths=[p for p in opts.paths if p not in self.unavailable])
        self.target, self.workload, self.out_dir, self.run_id = target, workload, out_dir, run_id
        self.console, self.resume = console, resume
        self.results: dict = {}
        self.save(list(resume.passes.values()) if resume else [], True, None)

    def save(self, passes: list, interrupted: bool, stopped: str | None) -> dict:
        self.results = build_results(self.run_id, self.metadata, passes,
                                     PassLines(self.records_path), PassLines(self.layouts_path),
                                     interrupted, self.unavailable, stopped)
        write_results(self.out_dir / RESULTS_FILE, self.results)
        return self.results

    @property
    def total(self) -> int:
        """Requests the run sends (for a progress bar)."""
        n, opts = self.workload.metadata["counts"]["requests"], self.opts
        per_pass = n + min(opts.warmup, n) + (n if opts.prime else 0)
        return per_pass * len(opts.paths) * len(opts.salt_modes) * opts.repeat

    @contextlib.contextmanager
    def running(self, progress: Progress | None) -> Iterator[Runner]:
        """The run's runner; on exit the results are saved (``interrupted`` unless the block
        ended normally), and the console says how to continue an unfinished run."""
        runner = Runner(self.target, self.workload, self.opts, self.out_dir, self.run_id,
                        self.secret, progress, self.resume)
        interrupted = True
        try:
            yield runner
            interrupted = False
        finally:
            results = self.save(runner.passes, interrupted, runner.stopped)
            measured = sum(p["completed"] + p["failed"] for p in results["passes"])
            kept = f"{measured} measured records kept"
            if interrupted:
                self.console.print(f"[yellow]run interrupted; {kept} in {self.out_dir} "
                                   f"(continue it with --resume {self.out_dir})[/]")
            elif runner.stopped:
                self.console.print(f"[red]run stopped early: {runner.stopped}; {kept} in "
                                   f"{self.out_dir} (continue it with --resume {self.out_dir})[/]")


def run_benchmark(target: Target, workload: Workload, opts: RunOptions, out_dir: Path,
                  run_id: str, console: Console, resume: Resume | None = None,
                  design: dict | None = None) -> dict:
    """Run (or, with ``resume``, continue) and save; return the results dict
    (``interrupted`` or ``stopped`` set if it did not finish). ``design``: the run's place
    in an A/B (:mod:`bench.campaigns.ab`), recorded in its metadata."""
    session = RunSession(target, workload, opts, out_dir, run_id, console, resume, design)
    with progress_bar(console, "requests", session.total) as progress, \
            session.running(progress) as runner:
        aio.run(runner.run())
    return session.results


def run_in_lockstep(sessions: dict[str, RunSession], lock: Lockstep) -> dict[str, dict]:
    """Two runs, keyed by side, whose steps take turns in ``lock``; their results
    (``interrupted`` or ``stopped`` set where one did not finish)."""
    with contextlib.ExitStack() as stack:
        runs = {}
        for side, session in sessions.items():
            runner = stack.enter_context(session.running(None))
            runner.lockstep, runner.side = lock, side
            runs[side] = runner.run()
        aio.run(lock.run(runs))
    return {side: session.results for side, session in sessions.items()}
