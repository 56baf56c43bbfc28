"""Judge cache_salt isolation per path and modality; probe uuids and timing side channels.

Exit codes: 0 all isolated, 1 a leak or under-hit found, 2 could not run.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.console import Console

from bench.benchmark import REPORTS, new_run_id
from bench.commands.run import csv_choices
from bench.isolation.experiment import (MODALITIES, IsolationOptions, exit_code, run_isolation,
                                        total_steps)
from bench.metadata import base_metadata
from bench.paths import PATHS
from bench.progress import progress_bar
from bench.tables import print_isolation, report_console
from bench.target import Target, add_target_arguments, open_target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--paths", type=csv_choices(list(PATHS)), default=list(PATHS))
    parser.add_argument("--modalities", type=csv_choices(MODALITIES), default=list(MODALITIES))
    parser.add_argument("--samples", type=int, default=12,
                        help="side-channel samples per group (0: skip the side channel)")
    parser.add_argument("--no-uuid-probe", dest="uuid_probe", action="store_false")
    parser.add_argument("--out", type=Path, help="output directory (default: reports/<run-id>)")
    add_target_arguments(parser)


def isolate(target: Target, opts: IsolationOptions, out_dir: Path, run_id: str,
            console: Console) -> dict:
    """Run the isolation experiment against ``target``; write ``out_dir/isolation.json``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with progress_bar(console, "isolation", total_steps(opts)) as progress:
        return asyncio.run(run_isolation(target, opts, run_id, out_dir / "isolation.json",
                                         {**base_metadata(), "target": target.metadata},
                                         progress))


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    opts = IsolationOptions(paths=args.paths, modalities=args.modalities,
                            samples=args.samples, uuid_probe=args.uuid_probe)
    run_id = new_run_id("isolation")
    out = args.out or REPORTS / run_id
    with open_target(args, console) as target:
        result = isolate(target, opts, out, run_id, console)
    print_isolation(result, report_console())
    console.print(f"isolation results: {out / 'isolation.json'} ({result['duration_s']:.0f}s)")
    return exit_code(result["cells"])
