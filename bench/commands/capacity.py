"""What salting costs in capacity: per path and salt mode, the highest request rate whose SLO
attainment meets a target, with an interval, from a search of measured probes (each a run at
one rate, open-loop, of the same workload from empty caches), and per path the share of
capacity salting costs. Writes ``capacity.json``, ``capacity.md`` and a chart.

Exit codes: 0 every search told both ends of its capacity's interval; 2 one did not (its row
says how it ended), or bad input. Not a gate.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.capacity.search import SearchSettings
from bench.errors import EXIT_OK, BenchError
from bench.goodput import parse_slos
from bench.options import add_target_arguments, csv_choices, number
from bench.outputs import REPORTS, new_run_id
from bench.paths import PATHS
from bench.run.settings import RunOptions
from bench.vocab import EXIT_CANNOT_JUDGE, SALT_MODES

DEFAULTS = SearchSettings(target=0.95)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default="image", help="workload spec (name in datasets/ or path)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the workload's seed (every probe sends the same workload)")
    parser.add_argument("--paths", type=csv_choices(list(PATHS)),
                        default=["chat", "generate-parts"])
    parser.add_argument("--salt-modes", type=csv_choices(SALT_MODES), default=list(SALT_MODES))
    parser.add_argument("--goodput", nargs="+", required=True, metavar="KEY:MS",
                        help="service-level objectives as `vllm bench serve --goodput` takes "
                             "them (ttft, tpot, e2el in ms), e.g. --goodput ttft:500")
    parser.add_argument("--burstiness", type=number(float, 0, strict=True), default=1.0,
                        help="arrivals as `vllm bench serve` draws them: 1 Poisson (default), "
                             "inf evenly spaced")
    g = parser.add_argument_group("search")
    g.add_argument("--attainment", type=number(float, 0, strict=True), default=DEFAULTS.target,
                   help="the share of requests that must meet the objectives (default: "
                        f"{DEFAULTS.target})")
    g.add_argument("--start-rate", type=number(float, 0, strict=True), default=DEFAULTS.start,
                   help=f"the first probe's request rate, req/s (default: {DEFAULTS.start})")
    g.add_argument("--requests", type=number(int, 1), default=DEFAULTS.requests,
                   help=f"requests per probe (default: {DEFAULTS.requests})")
    g.add_argument("--tolerance", type=number(float, 0, strict=True),
                   default=DEFAULTS.tolerance,
                   help="stop halving the bracket when its high / low <= 1 + this, and step "
                        f"by 1 + this around the capacity (default: {DEFAULTS.tolerance})")
    g.add_argument("--precision", type=number(float, 0, strict=True),
                   default=DEFAULTS.precision,
                   help="stop when the capacity interval's high / low <= 1 + this "
                        f"(default: {DEFAULTS.precision})")
    g.add_argument("--max-probes", type=number(int, 2), default=DEFAULTS.max_probes,
                   help=f"probes per search (default: {DEFAULTS.max_probes})")
    g.add_argument("--warmup", type=number(int, 0), default=2,
                   help="unmeasured requests before each probe (default: 2)")
    parser.add_argument("--out", type=Path, help="output directory (default: reports/<run-id>)")
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from bench.campaigns.capacity import CAPACITY_FILE, run_capacity
    from bench.docio import write_text
    from bench.engine.open import open_target
    from bench.report.capacity import (
        capacity_chart,
        capacity_markdown,
        capacity_table,
        cost_lines,
        loads_table,
    )
    from bench.report.tables import report_console, to_rich

    if args.attainment > 1:
        raise BenchError(f"--attainment {args.attainment}: a share of requests, at most 1")
    settings = SearchSettings(target=args.attainment, start=args.start_rate,
                              requests=args.requests, precision=args.precision,
                              tolerance=args.tolerance, max_probes=args.max_probes)
    opts = RunOptions(paths=args.paths, salt_modes=args.salt_modes, warmup=args.warmup,
                      burstiness=args.burstiness, goodput=parse_slos(args.goodput))
    console = Console(stderr=True)
    run_id = new_run_id("capacity")
    out = args.out or REPORTS / run_id
    with open_target(args, console) as target:
        doc = run_capacity(target, args.spec, opts, settings, out, run_id, console,
                           lambda row: console.print(
                               f"{row['path']} {row['salt_mode']}: {row['estimate']} "
                               f"[{row['low']}, {row['high']}] req/s ({row['stopped']})"),
                           args.seed)
    stdout = report_console()
    stdout.print(to_rich(capacity_table(doc)))
    stdout.print(to_rich(loads_table(doc)))
    for line in cost_lines(doc):
        stdout.print(line)
    write_text(out / "capacity.md", capacity_markdown(doc))
    capacity_chart(doc, out)
    console.print(f"capacity: {out / CAPACITY_FILE}")
    return EXIT_OK if doc["complete"] else EXIT_CANNOT_JUDGE
