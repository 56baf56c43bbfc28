"""Judge the tenant boundary per path and modality: the KV cache by cache_salt, media
content through the media caches (uuid probe) and timing (side channel).

Exit code (bench.verdicts.boundary.exit_code): 1 when a channel named by ``--fail-on``
(default: kv-cache, media-content) has a finding; else 2 when one of them could not be
judged or nothing was; else 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.engine.open import open_target
from bench.isolation.experiment import IsolationOptions, isolate
from bench.options import add_fail_on_argument, add_target_arguments, csv_choices
from bench.outputs import ISOLATION_FILE, REPORTS, new_run_id
from bench.paths import PATHS
from bench.report.replica_tables import routed_isolation_table
from bench.report.tables import print_isolation, report_console, to_rich
from bench.stats import POWER_TARGET
from bench.verdicts.boundary import exit_code
from bench.vocab import CLIENT_UUIDS, DEFAULT_FAIL_ON, MODALITIES


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
    add_fail_on_argument(parser, DEFAULT_FAIL_ON)
    parser.add_argument("--client-uuids", choices=CLIENT_UUIDS, default=CLIENT_UUIDS[0],
                        help="media uuids in the uuid probe and side channel: as the tenant "
                             "gave them, or per-tenant (namespaced by a digest of the salt, "
                             "as a gateway would; a mitigation to measure) (default: "
                             "%(default)s)")
    parser.add_argument("--out", type=Path, help="output directory (default: reports/<run-id>)")
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    opts = IsolationOptions(paths=args.paths, modalities=args.modalities,
                            samples=args.samples, uuid_probe=args.uuid_probe,
                            fail_on=args.fail_on, client_uuids=args.client_uuids)
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
