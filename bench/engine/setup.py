"""A target's set-up: a managed engine (environment, flags, model, server config) or a
running server (its model, block size and capabilities, probed)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console

from bench.cachedirs import cache_dir
from bench.engine.block_size import measure_block_size
from bench.engine.capabilities import NEVER, WHEN_NONZERO, cached_tokens_reporting
from bench.engine.environment import EngineEnv
from bench.engine.gpu import DEFAULT_UTILIZATION, gpu_metadata, local_gpus
from bench.engine.model import build_model
from bench.engine.provision import open_env, provision
from bench.engine.reference import check_fits
from bench.engine.routes import find_routes
from bench.engine.serve_flags import serve_flags
from bench.engine.server import CPU_MAX_NUM_SEQS, ManagedServer, ServerConfig
from bench.engine.spec import default_engine_spec
from bench.engine.target import Target, auth_headers
from bench.errors import BenchError

DEFAULT_BLOCK_SIZE = 32
#: How a target's block size was obtained (``block_size_source`` in its metadata): from the
#: server's ``/server_info``, measured from cached token counts, or given (``--block-size``,
#: or the flag saltbench started the server with).
BLOCK_REPORTED, BLOCK_MEASURED, BLOCK_GIVEN = "reported", "measured", "given"
#: What a running server's hardware is recorded as: it may run on another machine than
#: the client, whose ``machine`` block every result carries.
UNKNOWN_MACHINE = "unknown: a running server's machine is not read"


def with_capabilities(target: Target, reporting: str | None = None) -> Target:
    """``target`` with what a probe of the server shows (``reporting``: the cached-tokens
    reporting, if probed already), recorded in its metadata."""
    reporting = reporting or cached_tokens_reporting(target.base_url, target.model,
                                                     target.headers)
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
    reported, reporting = cache.get("block_size"), None
    if block_size is not None:
        if reported is not None and reported != block_size:
            raise BenchError(f"--block-size {block_size}: the server at {url} uses {reported}")
        source = BLOCK_GIVEN
    elif reported is not None:
        block_size, source = int(reported), BLOCK_REPORTED
    else:
        reporting = cached_tokens_reporting(url, model, headers)
        if reporting == NEVER:
            raise BenchError(f"{option} {url}: the server reports neither its block size nor "
                             "cached tokens; set --block-size")
        max_len = next((m.get("max_model_len") for m in models if m["id"] == model), None)
        block_size = measure_block_size(url, model, headers,
                                        zero_cached_omitted=reporting == WHEN_NONZERO,
                                        max_tokens=min(max_len or 8192, 8192) - 1)
        source = BLOCK_MEASURED
        console.print(f"{url} does not report its block size: measured {block_size} from "
                      "cached token counts")
    if cache.get("enable_prefix_caching") is False:
        console.print(f"[yellow]{url} runs without prefix caching: no request will hit[/]")
    return with_capabilities(Target(url, model, block_size, None, {
        "managed": False, "server_url": url, "vllm_version": version,
        "gpus": UNKNOWN_MACHINE,
        "model": model, "block_size": block_size, "block_size_source": source,
        "cache_config": _summary(cache)}, api_key=api_key), reporting)


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
        """What every result records about a started ``server`` of this engine; a
        BenchError if the server reports another block size than it was started with."""
        cache = _cache_config(server.base_url, auth_headers(self.api_key))
        reported = cache.get("block_size")
        if reported is not None and reported != self.config.block_size:
            raise BenchError(f"{server.base_url}: started with --block-size "
                             f"{self.config.block_size}, the server uses {reported}")
        return {
            "managed": True, "vllm_version": self.env.vllm_version, "engine": self.env.info,
            "model": self.config.served_name, "model_info": self.model_meta,
            "block_size": self.config.block_size,
            "block_size_source": BLOCK_GIVEN if reported is None else BLOCK_REPORTED,
            "flags": server.flags, "flags_dropped": self.dropped,
            "env": server.config.env(), "cache_config": _summary(cache),
            "server_start_s": round(server.start_s or 0.0, 1), "api_key": bool(self.api_key),
            **({} if self.env.is_cpu else {"gpus": gpu_metadata(
                local_gpus(), self.env.python, self.env.info["versions"].get("torch"))})}


def engine_setup(args: argparse.Namespace, console: Console) -> EngineSetup:
    """Provision (or open) the engine and build (or name) the model the options ask for."""
    env = _engine_env(args, console)
    supported = serve_flags(env)
    if args.model:
        model_path, served, load_format, model_meta = args.model, Path(args.model).name, None, {
            "model": args.model}
        if args.load_format:
            model_meta["load_format"] = load_format = args.load_format
    else:
        local = build_model(env, args.model_preset)
        model_path, served, load_format = str(local.path), local.served_name, local.load_format
        model_meta = local.metadata()
        need = local.needed_gib(args.max_model_len)
        if need is not None:
            model_meta["needed_gib"] = round(need, 1)
            if not env.is_cpu:
                check_fits(args.model_preset, need, local_gpus(), args.tensor_parallel_size or 1,
                           args.gpu_memory_utilization or DEFAULT_UTILIZATION)
    config = ServerConfig(
        model=model_path, served_name=served, media_dir=cache_dir("workloads"),
        load_format=load_format, block_size=args.block_size or DEFAULT_BLOCK_SIZE,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs or (CPU_MAX_NUM_SEQS if env.is_cpu else None),
        max_num_batched_tokens=args.max_num_batched_tokens,
        tensor_parallel_size=args.tensor_parallel_size,
        gpu_memory_utilization=args.gpu_memory_utilization,
        offline=Path(model_path).exists(),
        cpu_kvcache_gib=1 if env.is_cpu else None,
        extra_args=serve_args(getattr(args, "serve_args", []), supported, env.vllm_version),
    )
    setup = EngineSetup(env, supported, config, model_meta, args.api_key)
    if setup.dropped:
        console.print(f"[yellow]vLLM {env.vllm_version} does not accept "
                      f"{', '.join(setup.dropped)}: starting without[/]")
    return setup


def serve_args(given: list[str], supported: frozenset[str] | None,
               version: str | None) -> list[str]:
    """``--serve-arg`` values, each split at its first ``=``; a flag this vLLM does not
    accept is a BenchError naming it (not a server that fails to start minutes later)."""
    out = []
    for arg in given:
        flag, eq, value = arg.partition("=")
        if not flag.startswith("--"):
            raise BenchError(f"--serve-arg {arg!r}: give a long option, e.g. "
                             "--serve-arg=--mm-processor-cache-gb=0")
        if supported is not None and flag not in supported:
            raise BenchError(f"--serve-arg: vLLM {version} does not accept {flag}")
        out += [flag, value] if eq else [flag]
    return out


def log_stamp() -> str:
    """A timestamp for the name of a managed process's log."""
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")
