"""The end-to-end demo on the embedded CPU engine: provision, build the model, serve it;
a cache_salt sequence per modality; the demo workload on every path with and without
salt; the isolation verdicts; and a report with charts under reports/<run-id>/.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import time
from pathlib import Path

import aiohttp
from rich.console import Console

from bench import aio, salts
from bench.cachedirs import cache_dir
from bench.client.connections import streaming
from bench.engine.model import demo_preset
from bench.engine.open import open_target
from bench.engine.target import Target
from bench.isolation.experiment import IsolationOptions, isolate
from bench.isolation.probe import prompt
from bench.isolation.probe_media import probe_media
from bench.options import add_run_arguments, add_target_arguments, options_from
from bench.outputs import REPORTS, new_run_id
from bench.paths.base import PathContext
from bench.paths.chat import ChatPath
from bench.paths.media_urls import MediaUrls
from bench.report.tables import Table, ms, print_isolation, print_summary, report_console, to_rich
from bench.run.exchange import exchange
from bench.run.session import run_benchmark
from bench.verdicts.boundary import exit_code
from bench.verdicts.runs import problems
from bench.vocab import EXIT_FOUND, EXIT_OK, KV, MEDIA_MODALITIES, worst_exit
from bench.workload import open_workload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default="demo", help="workload spec (default: %(default)s)")
    parser.add_argument("--requests", type=int, help="override the spec's request count")
    parser.add_argument("--samples", type=int, default=8,
                        help="side-channel sample pairs per row (default: %(default)s; the "
                             "side-channel table shows the smallest paired AUC each row can "
                             "detect)")
    add_run_arguments(parser)
    add_target_arguments(parser)
    # Prefill must dominate TTFT for a prefix hit to be visibly faster, in minutes.
    parser.set_defaults(model_preset=demo_preset())


async def salt_sequence(target: Target, media_root: Path) -> list[dict]:
    """Per modality, one chat request sent unsalted twice, with salt A twice, then salt B."""
    rows = []
    seq = [("none", None), ("none", None), ("A", "a"), ("A", "a"), ("B", "b")]
    async with aiohttp.ClientSession(headers=target.headers) as session, \
            streaming(target.headers):
        for modality in MEDIA_MODALITIES:
            item = probe_media(modality, f"{modality}-demo", media_root)  # never sent before
            ctx = PathContext(target.base_url, target.model, {item.id: item}, MediaUrls("data"),
                              zero_cached_omitted=target.zero_cached_omitted)
            messages = prompt(modality, item.id)  # a fresh nonce: nothing cached before
            run_salts = {k: secrets.token_hex(16) for k in ("a", "b")}
            for label, key in seq:
                salt = run_salts[key] if key else None
                out = await exchange(session, ChatPath(ctx), messages, 4, salt, 600)
                rows.append({"modality": modality, "salt": label, "digest": salts.digest(salt),
                             **out})
    return rows


def sequence_table(rows: list[dict]) -> Table:
    return Table("cache_salt on the chat path: the same request, five times",
                 ["modality", "salt", "salt digest", "prompt tokens", "cached tokens", "TTFT ms"],
                 [[r["modality"], r["salt"], r["digest"] or "–", str(r["prompt_tokens"]),
                   str(r["cached_tokens"]), ms(r["ttft_ms"]) if r["ok"] else r["error"]]
                  for r in rows], keys=3)


def run(args: argparse.Namespace) -> int:
    from bench.report.build import build_report  # matplotlib only when reporting
    from bench.report.findings import findings

    console, out_console = Console(stderr=True), report_console()
    started = time.monotonic()
    workload = open_workload(args.spec, requests=args.requests)
    run_id = new_run_id("demo")
    out = args.out or REPORTS / run_id
    with open_target(args, console) as target:
        media_root = cache_dir("probe-media") / run_id
        try:
            rows = aio.run(salt_sequence(target, media_root))
        finally:
            shutil.rmtree(media_root, ignore_errors=True)
        out_console.print(to_rich(sequence_table(rows)))
        results = run_benchmark(target, workload, options_from(args), out, run_id, console)
        print_summary(results, out_console)
        # The demo shows every channel and fails only on a KV leak: media content and
        # timing are open on stock vLLM, which `isolation` gates (docs/isolation.md).
        isolation = isolate(target, IsolationOptions(paths=args.paths, samples=args.samples,
                                                     fail_on=(KV,), timeout_s=args.timeout),
                            out, run_id, console)
        print_isolation(isolation, out_console)
    out_console.print("[bold]Findings[/]")
    for finding in findings(results, isolation):
        out_console.print(f"- {finding}", markup=False)
    report = build_report([out], out)
    console.print(f"demo done in {time.monotonic() - started:.0f}s; report: "
                  f"{report / 'index.html'} and {report / 'summary.md'}")
    return worst_exit([exit_code(isolation), EXIT_FOUND if problems(results) else EXIT_OK])
