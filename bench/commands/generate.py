"""Generate a workload directory (manifest + media) from a spec file or a dataset name."""

from __future__ import annotations

import argparse

from bench.workload import generate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="spec file, or a name in datasets/ (e.g. smoke)")
    parser.add_argument("--seed", type=int, help="override the spec's seed")
    parser.add_argument("--requests", type=int, help="override the number of requests")
    parser.add_argument("--out", help="output directory (default: the saltbench cache)")
    parser.add_argument("--force", action="store_true",
                        help="regenerate even if the directory already holds this workload")


def run(args: argparse.Namespace) -> int:
    print(generate(args.spec, seed=args.seed, requests=args.requests, out=args.out,
                   force=args.force))
    return 0
