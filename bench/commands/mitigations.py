"""Measure which server settings and client uuid modes close each channel of the tenant
boundary, and what each costs in TTFT: one managed server and isolation run per
configuration. Writes ``mitigations.json`` and prints the table.

Exit codes: 0 every configuration ran; 2 one could not (its row says why). Not a gate:
each configuration's own isolation exit code is in its row.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from bench.campaigns.mitigations import DEFAULT_CONFIGS, MITIGATIONS_FILE, parse_config
from bench.errors import BenchError
from bench.isolation.experiment import IsolationOptions
from bench.options import add_target_arguments, csv_choices
from bench.outputs import REPORTS, new_run_id
from bench.paths import PATHS
from bench.report.mitigations import mitigation_table
from bench.report.tables import report_console, to_rich
from bench.vocab import EXIT_CANNOT_JUDGE, EXIT_OK, MODALITIES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", dest="configs", type=parse_config, action="append",
                        metavar="NAME=ARGS",
                        help="a configuration: a name, then `vllm serve` flags and/or "
                             "client-uuids=per-tenant, e.g. "
                             "'no-cache=--mm-processor-cache-gb=0'; repeat (default: "
                             f"{', '.join(c.name for c in DEFAULT_CONFIGS)})")
    parser.add_argument("--paths", type=csv_choices(list(PATHS)),
                        default=["chat", "generate-parts"])
    parser.add_argument("--modalities", type=csv_choices(MODALITIES),
                        default=["text", "image", "audio", "video"])
    parser.add_argument("--samples", type=int, default=None,
                        help="side-channel sample pairs per row (default: as `isolation`)")
    parser.add_argument("--out", help="output directory (default: reports/<run-id>)")
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bench.campaigns.mitigations import run_mitigations

    if args.server_url or args.serve_args:
        raise BenchError("mitigations starts a server per configuration: drop --server-url, "
                         "and give serve flags in --config")
    console = Console(stderr=True)
    out = Path(args.out) if args.out else REPORTS / new_run_id("mitigations")
    opts = IsolationOptions(paths=args.paths, modalities=args.modalities, samples=args.samples)
    doc = run_mitigations(args, list(args.configs or DEFAULT_CONFIGS), opts, out, console,
                          lambda row: console.print(f"{row['config']}: {row['status']}"))
    report_console().print(to_rich(mitigation_table(doc)))
    console.print(f"mitigations: {out / MITIGATIONS_FILE}")
    return EXIT_OK if all(r["status"] == "ok" for r in doc["rows"]) else EXIT_CANNOT_JUDGE
