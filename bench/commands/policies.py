"""Compare vllm-router policies x salt modes on one set of managed replicas.

The replicas start once; each policy gets its own router and run directory (prefix caches
reset in between). Writes ``policies.json``, ``policies.md`` and ``policies.png|svg``.

Exit codes: 0 every policy ran without a problem; 1 a run found a problem (a leak, an
under-hit, counters that disagree, unattributed requests); 2 a policy could not run.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from bench.campaigns.policies import run_policies
from bench.engine.replicas import start_replicas
from bench.engine.router import KV_AWARE, POLICIES
from bench.engine.setup import engine_setup
from bench.errors import BenchError
from bench.options import add_run_arguments, add_target_arguments, csv_choices, options_from
from bench.outputs import REPORTS, new_run_id
from bench.report.policies import policies_markdown, policy_chart, policy_notes, policy_table
from bench.report.tables import report_console, to_rich
from bench.workload import open_workload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default="mixed-tenants",
                        help="workload spec (name in datasets/ or path) or a workload directory")
    parser.add_argument("--seed", type=int, help="workload seed (default: the spec's)")
    parser.add_argument("--requests", type=int, help="override the spec's request count")
    parser.add_argument("--policies", type=csv_choices(POLICIES),
                        default=["round_robin", "cache_aware", KV_AWARE],
                        help="comma-separated router policies (default: %(default)s)")
    add_run_arguments(parser)
    add_target_arguments(parser)
    parser.set_defaults(replicas=2)


def run(args: argparse.Namespace) -> int:
    if args.server_url or args.replica_url or args.router:
        raise BenchError("policies starts its own replicas and routers: drop --server-url, "
                         "--replica-url and --router (choose policies with --policies)")
    console = Console(stderr=True)
    workload = open_workload(args.spec, args.seed, args.requests)
    opts = options_from(args)
    out = args.out or REPORTS / new_run_id("policies")
    setup = engine_setup(args, console)
    with start_replicas(setup, args.replicas, args.start_timeout, console) as replica_set:
        doc = run_policies(replica_set, args.policies, workload, opts, out, console,
                           policies_markdown, args.api_key)
    if doc["rows"]:
        policy_chart(doc, out)
    stdout = report_console()
    stdout.print(to_rich(policy_table(doc)))
    for line in policy_notes(doc):
        stdout.print(line)
    console.print(f"policies: {out} (exit {doc['exit_code']})")
    return doc["exit_code"]
