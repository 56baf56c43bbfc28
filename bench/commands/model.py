"""Build (or find in the cache) a local random-weight multimodal model."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from bench.engine.model import PRESET_NAMES, build_model
from bench.engine.provision import open_env, provision
from bench.engine.spec import default_engine_spec, engine_spec_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("preset", choices=PRESET_NAMES)
    parser.add_argument("--engine", type=engine_spec_arg, metavar="SPEC")
    parser.add_argument("--engine-python", type=Path, metavar="PATH")


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    env = (open_env(args.engine_python) if args.engine_python
           else provision(args.engine or default_engine_spec(), console))
    model = build_model(env, args.preset)
    print(json.dumps(model.metadata(), indent=2))
    return 0
