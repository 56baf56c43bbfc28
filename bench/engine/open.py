"""Open the target the options ask for: a managed server, a running one, or replicas
behind a router; whatever is managed is stopped on exit."""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator

from rich.console import Console

from bench.cachedirs import cache_dir
from bench.engine.replicas import open_replicas
from bench.engine.server import check_port_free
from bench.engine.setup import engine_setup, external_server, log_stamp, with_capabilities
from bench.engine.target import Target


@contextlib.contextmanager
def open_target(args: argparse.Namespace, console: Console | None = None) -> Iterator[Target]:
    """Yield a ready target; a managed server is stopped on exit, whatever happens."""
    console = console or Console(stderr=True)
    if any(getattr(args, o, None) for o in ("replicas", "replica_url", "router")):
        with open_replicas(args, console) as target:
            yield target
        return
    if args.server_url:
        ignored = [f"--{o.replace('_', '-')}" for o in ("engine", "engine_python", "port")
                   if getattr(args, o) is not None]
        if ignored:
            console.print(f"[yellow]--server-url: ignoring {', '.join(ignored)} "
                          "(the server is not managed by saltbench)[/]")
        yield external_server(args.server_url, args.block_size, args.model, args.api_key, console)
        return
    if args.port is not None:
        check_port_free(args.port)  # before minutes of provisioning, not after
    setup = engine_setup(args, console)
    server = setup.server(cache_dir("logs") / f"server-{log_stamp()}.log", args.port,
                          args.start_timeout)
    console.print(f"Starting vLLM {setup.env.vllm_version} on port {server.port} "
                  f"(log: {server.log_path})")
    started = time.monotonic()
    with server:
        console.print(f"[green]✓[/] server ready in {time.monotonic() - started:.0f}s")
        yield with_capabilities(Target(server.base_url, setup.config.served_name,
                                        setup.config.block_size, setup.config.media_dir,
                                        setup.metadata(server), api_key=args.api_key))
