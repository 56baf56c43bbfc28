"""Measure saltbench's client against vllm bench serve, AIPerf, GuideLLM and inference-perf
and a minimal loopback client, on the same prompts, against a zero-work server.

Every client runs as its own process; throughput, TTFT and ITL are what each reports
(against a zero-work server, its own overhead), with its CPU time and peak RSS. Writes
``clientbench.json``, ``clientbench.md`` and ``clientbench.png|svg`` (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from bench.clientbench import report
from bench.clientbench.session import CLIENTS, FILE, PROMPT_KINDS, Plan, run_clientbench
from bench.errors import EXIT_OK
from bench.options import csv_choices, number
from bench.outputs import REPORTS, new_run_id
from bench.peers import DRIVERS
from bench.peers.provision import provision


def add_arguments(parser: argparse.ArgumentParser) -> None:
    plan = Plan()
    parser.add_argument("--clients", type=csv_choices(CLIENTS), default=plan.clients,
                        help=f"comma-separated (default: all: {','.join(CLIENTS)}); peers that "
                             "are not provisioned are skipped")
    parser.add_argument("--prompts", type=csv_choices(PROMPT_KINDS), default=plan.prompts)
    parser.add_argument("--concurrency", type=_ints, default=plan.concurrencies,
                        help="comma-separated concurrencies (default: 1,16,64,256)")
    parser.add_argument("--rates", type=_floats, default=[],
                        help="comma-separated request rates for a sweep (default: none)")
    parser.add_argument("--requests", type=number(int, 1), default=plan.requests)
    parser.add_argument("--repeat", type=number(int, 1), default=plan.repeat)
    parser.add_argument("--workers", type=number(int, 1), default=1,
                        help="saltbench's --workers (default: 1)")
    parser.add_argument("--provision", action="append", choices=sorted(DRIVERS), default=[],
                        metavar="PEER", help="install a peer into its own environment first "
                                             "(repeatable; vllm-bench is the engine's)")
    parser.add_argument("--out", type=Path, help="output directory (default: reports/<id>)")


def _ints(text: str) -> list[int]:
    return [number(int, 1)(x) for x in text.split(",") if x.strip()]


def _floats(text: str) -> list[float]:
    return [number(float, 0, strict=True)(x) for x in text.split(",") if x.strip()]


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    for name in args.provision:
        if name != "vllm-bench":
            provision(name, console)
    out = args.out or REPORTS / new_run_id("clientbench")
    out.mkdir(parents=True, exist_ok=True)
    plan = Plan(args.clients, args.prompts, args.concurrency, args.rates, args.requests,
                args.repeat, workers=args.workers)
    try:
        doc = run_clientbench(plan, out, console)
    except KeyboardInterrupt:  # what was measured is in the JSON: report it too
        if (out / FILE).exists():
            report.write(json.loads((out / FILE).read_text()), out)
        raise
    paths = report.write(doc, out)
    console.print(report.markdown(doc))
    console.print("outputs: " + ", ".join(str(p) for p in [out / FILE, *paths]))
    return EXIT_OK
