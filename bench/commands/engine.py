"""Provision and check an engine environment, or serve it until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import threading

from rich.console import Console

from bench.engine.open import open_target
from bench.engine.provision import env_dir, open_env, provision
from bench.engine.spec import default_engine_spec
from bench.options import add_target_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["provision", "check", "serve"],
                        help="provision: build/reuse the environment; check: verify and print "
                             "its versions; serve: start the server and wait for Ctrl-C")
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    if args.action == "serve":
        with open_target(args, console) as target:
            console.print(f"serving {target.model} at {target.base_url} (Ctrl-C stops it)")
            threading.Event().wait()
    spec = args.engine or default_engine_spec()
    if args.engine_python:
        env = open_env(args.engine_python)
    elif args.action == "check" and not (env_dir(spec) / "bin" / "python").exists():
        console.print(f"engine {spec} is not provisioned (run: saltbench engine provision)")
        return 1
    else:
        env = provision(spec, console)
        if args.action == "check":
            env = open_env(env.python)
    print(json.dumps({"python": str(env.python), **env.info}, indent=2))
    return 0
