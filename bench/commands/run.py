"""Run a workload through request paths, with and without salt, and record everything."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.benchmark import REPORTS, new_run_id, run_benchmark
from bench.errors import BenchError
from bench.paths import PATHS
from bench.paths.media_urls import URL_MODES
from bench.results import problems
from bench.runner import SALT_MODES, RunOptions
from bench.tables import print_summary, report_console
from bench.target import add_target_arguments, open_target
from bench.workload import generate, load_workload


def csv_choices(choices: tuple | list):
    """An argparse type: a comma-separated, non-empty list of ``choices``."""
    def parse(text: str) -> list[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(bad) or 'empty list'}; choose from {', '.join(choices)}")
        return items
    return parse


def number(kind: type, minimum: float, *, strict: bool = False):
    """An argparse type: a ``kind`` number >= ``minimum`` (> with ``strict``)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if strict else '>='} {minimum}, got {text}")
        return value
    return parse


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Load and path options shared by ``run`` and ``demo``."""
    g = parser.add_argument_group("load")
    g.add_argument("--paths", type=csv_choices(list(PATHS)), default=list(PATHS),
                   help=f"comma-separated request paths (default: all: {','.join(PATHS)})")
    g.add_argument("--salt-modes", type=csv_choices(SALT_MODES), default=list(SALT_MODES),
                   help="none: no cache_salt; salted: the workload's salt per request "
                        "(default: both)")
    g.add_argument("--rate", type=number(float, 0, strict=True),
                   help="requests per second; inf: all at once (default: the workload's "
                        "arrival times if it has them, else inf)")
    g.add_argument("--burstiness", type=number(float, 0, strict=True), default=1.0,
                   help="gamma shape of arrivals: 1 = Poisson (default), inf = constant")
    g.add_argument("--max-concurrency", type=number(int, 0), default=1,
                   help="requests in flight at most (default: 1, serial; 0 = unlimited)")
    g.add_argument("--warmup", type=number(int, 0), default=2,
                   help="warm-up requests per pass")
    g.add_argument("--prime", action="store_true",
                   help="send the workload once before measuring (measure a warm cache)")
    g.add_argument("--timeout", type=number(float, 0, strict=True), default=600.0,
                   help="per-request timeout, s")
    g.add_argument("--media-url", choices=URL_MODES, default="data",
                   help="send media inline (data:) or as file:// URLs (managed server)")
    g.add_argument("--audio-part", choices=("audio_url", "input_audio"), default="audio_url")
    g.add_argument("--out", type=Path, help="output directory (default: reports/<run-id>)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default="smoke",
                        help="workload spec (name in datasets/ or path) or a workload directory")
    parser.add_argument("--seed", type=int, help="workload seed (default: the spec's)")
    parser.add_argument("--requests", type=int, help="override the spec's request count")
    add_run_arguments(parser)
    add_target_arguments(parser)


def options_from(args: argparse.Namespace) -> RunOptions:
    if args.audio_part == "input_audio" and args.media_url != "data":
        raise BenchError("--audio-part input_audio carries the audio inline: it needs "
                         "--media-url data")
    return RunOptions(
        paths=args.paths, salt_modes=args.salt_modes, rate=args.rate,
        burstiness=args.burstiness, max_concurrency=args.max_concurrency or None,
        warmup=args.warmup, prime=args.prime, timeout_s=args.timeout,
        media_url=args.media_url, audio_part=args.audio_part)


def open_workload(spec: str, seed: int | None = None, requests: int | None = None):
    """A generated workload directory as it is, or a spec generated (or reused) first."""
    path = Path(spec)
    if path.is_dir():
        if seed is not None or requests is not None:
            raise BenchError(f"--spec {spec}: a generated workload; --seed and --requests "
                             "apply to spec files only")
        return load_workload(path)
    return load_workload(generate(spec, seed=seed, requests=requests))


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    workload = open_workload(args.spec, args.seed, args.requests)
    opts = options_from(args)
    run_id = new_run_id(workload.metadata["spec"]["name"])
    out = args.out or REPORTS / run_id
    with open_target(args, console) as target:
        results = run_benchmark(target, workload, opts, out, run_id, console)
    print_summary(results, report_console())
    console.print(f"results: {out / 'results.json'}")
    for problem in (found := problems(results)):
        console.print(f"[red]{problem}[/]")
    return 1 if found else 0
