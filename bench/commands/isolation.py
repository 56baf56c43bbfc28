"""Judge cache_salt isolation per path and modality; probe uuids and timing side channels.

Exit code: the worst verdict's (bench.verdicts.isolation.exit_code; LEAK > ERROR >
UNDER-HIT > ISOLATED): 1 a leak, else 2 an error or nothing judged, else 1 an under-hit,
else 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.engine.open import open_target
from bench.isolation.experiment import IsolationOptions, isolate
from bench.isolation.side_channel import POWER_TARGET
from bench.options import add_target_arguments, csv_choices
from bench.outputs import ISOLATION_FILE, REPORTS, new_run_id
from bench.paths import PATHS
from bench.report.replica_tables import routed_isolation_table
from bench.report.tables import print_isolation, report_console, to_rich
from bench.verdicts.isolation import exit_code
from bench.vocab import MODALITIES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--paths", type=csv_choices(list(PATHS)), default=list(PATHS))
    parser.add_argument("--modalities", type=csv_choices(MODALITIES), default=list(MODALITIES))
    parser.add_argument("--samples", type=int, default=None,
                        help="side-channel sample pairs per row (0: skip the side channel; "
                             "default: enough to detect a paired AUC of {target_auc} with "
                             "{power:.0%} power at alpha {alpha}, Holm-adjusted across the "
                             "run's cross-tenant rows)"
                             .format(**POWER_TARGET).replace("%", "%%"))
    parser.add_argument("--no-uuid-probe", dest="uuid_probe", action="store_false")
    parser.add_argument("--out", type=Path, help="output directory (default: reports/<run-id>)")
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    opts = IsolationOptions(paths=args.paths, modalities=args.modalities,
                            samples=args.samples, uuid_probe=args.uuid_probe)
    run_id = new_run_id("isolation")
    out = args.out or REPORTS / run_id
    with open_target(args, console) as target:
        result = isolate(target, opts, out, run_id, console)
    stdout = report_console()
    print_isolation(result, stdout)
    if result.get("routed"):
        stdout.print(to_rich(routed_isolation_table(result)))
    console.print(f"isolation results: {out / ISOLATION_FILE} ({result['duration_s']:.0f}s)")
    return exit_code(result)
