"""Several vLLM replicas behind vLLM's router, as one :class:`~bench.engine.target.Target`.

Managed (``--replicas N --router POLICY``): N servers of one engine on distinct free ports,
each naming itself in a response header (``scripts/replica_header.py``) and publishing its
KV-cache events (for ``kv_aware``), on a CPU engine each bound to its own core, on a CUDA
engine each on its own GPUs (or an equal share of one's memory); then
vllm-router in front; all stopped together. Running (``--server-url ROUTER --replica-url
URL ...``): nothing is managed. Either way the target lists its replicas, so that counters
are scraped from each one and every request is attributed to the one that served it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import psutil
from rich.console import Console

from bench.cachedirs import cache_dir
from bench.engine.capabilities import WHEN_NONZERO, cached_tokens_reporting
from bench.engine.gpu import DEFAULT_UTILIZATION, Placement, local_gpus, place_replicas
from bench.engine.provision import script
from bench.engine.reference import check_fits
from bench.engine.router import (
    DEFAULT_POLICY,
    KV_AWARE,
    ManagedRouter,
    RouterConfig,
    provision_router,
)
from bench.engine.routes import ROUTES, find_routes, probe_status
from bench.engine.server import ManagedServer, ServerConfig, stop_all
from bench.engine.setup import EngineSetup, engine_setup, external_server, log_stamp
from bench.engine.target import Replica, Target, auth_headers
from bench.errors import BenchError
from bench.vocab import CHAT_ROUTE

#: ``vllm serve --middleware`` value that names the replica in every response.
MIDDLEWARE = "replica_header.ReplicaHeader"
#: Answers of a routed probe that show the router forwarded it to a replica.
_FORWARDED = (200, 400, 422)


def distinct_ports(n: int) -> list[int]:
    """``n`` different free TCP ports on 127.0.0.1 (all held open while they are picked)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def group_rss_mib(pgid: int) -> float:
    """Resident memory of every process in a process group, MiB."""
    total = 0
    for proc in psutil.process_iter(["memory_info"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["memory_info"]:
                total += proc.info["memory_info"].rss
        except (ProcessLookupError, psutil.Error):
            continue
    return round(total / 2**20, 1)


def placements(setup: EngineSetup, n: int) -> list[Placement | None]:
    """Where each of ``n`` replicas runs: a CPU engine's pick their cores themselves
    (:func:`replica_config`); a CUDA engine's get their own GPUs or shares of them, or a
    BenchError before anything starts."""
    if setup.env.is_cpu:
        return [None] * n
    config, gpus = setup.config, local_gpus()
    tensor_parallel = config.tensor_parallel_size or 1
    where = place_replicas(n, gpus, tensor_parallel,
                           config.gpu_memory_utilization or DEFAULT_UTILIZATION)
    need = setup.model_meta.get("needed_gib")
    for p in where if need is not None else []:
        if p.memory_share is not None:  # a share of one GPU: does the model fit in it?
            check_fits(setup.model_meta["preset"], need,
                       [g for g in gpus if str(g.index) == p.devices], 1, p.memory_share)
    return where


def on_gpus(config: ServerConfig, placement: Placement | None) -> ServerConfig:
    """``config`` on ``placement``'s GPUs (``CUDA_VISIBLE_DEVICES``) with its share of their
    memory; unchanged without a placement (a CPU engine)."""
    if placement is None:
        return config
    if placement.memory_share is not None:
        config = replace(config, gpu_memory_utilization=placement.memory_share)
    return replace(config, extra_env={**config.extra_env,
                                      "CUDA_VISIBLE_DEVICES": placement.devices})


def replica_config(setup: EngineSetup, index: int, kv_port: int,
                   placement: Placement | None = None) -> ServerConfig:
    """Replica ``index``'s config: the shared one, plus the header middleware and KV events
    on ``kv_port`` where the engine accepts them, and its own core (CPU engine) or its
    ``placement`` (CUDA engine: its GPUs, its share of their memory).

    vLLM's publisher binds only a wildcard endpoint (``tcp://*:PORT``, every interface) and
    vllm-router subscribes only to ``tcp://HOST:PORT``, so the events are published on every
    interface of this machine (nothing but ``kv_aware`` reads them)."""
    args, env = [], {}
    if "--middleware" in setup.supported:
        args += ["--middleware", MIDDLEWARE]
        env["PYTHONPATH"] = str(script("replica_header.py").parent)
    if "--kv-events-config" in setup.supported:
        args += ["--kv-events-config", json.dumps({
            "enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{kv_port}",
            "topic": "kv"}, separators=(",", ":"))]
    config = on_gpus(setup.config, placement)
    if setup.env.is_cpu:
        env["VLLM_CPU_OMP_THREADS_BIND"] = str(index % (os.cpu_count() or 1))
    # Replicas start at once: each compiles into its own cache (bench.campaigns.ab._placed).
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir("inductor") / f"replica-{index}")
    return replace(config, extra_args=[*config.extra_args, *args],
                   extra_env={**config.extra_env, **env})


@dataclass
class ReplicaSet:
    """Managed replicas of one engine, started together."""

    setup: EngineSetup
    servers: list[ManagedServer]
    kv_events: dict[str, str]  # replica URL -> the endpoint its KV events are published on
    start_s: float  # from the first launch to the last replica ready
    #: How every replica reports cached tokens (asked of each: it also warms each one up).
    reporting: str

    @property
    def replicas(self) -> tuple[Replica, ...]:
        return tuple(Replica(f"r{i}", s.base_url, True) for i, s in enumerate(self.servers))

    def metadata(self) -> list[dict]:
        """Per replica: name, URL, start time, memory and its own flags and environment."""
        return [{"name": r.name, "url": r.url, "managed": True,
                 "start_s": round(s.start_s or 0.0, 1), "rss_mib": group_rss_mib(s.proc.pid),
                 "extra_args": s.config.extra_args, "extra_env": s.config.extra_env}
                for r, s in zip(self.replicas, self.servers)]


@contextlib.contextmanager
def start_replicas(setup: EngineSetup, n: int, start_timeout_s: float,
                   console: Console) -> Iterator[ReplicaSet]:
    """Start ``n`` replicas at once and wait for all; every one is stopped on exit."""
    stamp = log_stamp()
    where = placements(setup, n)
    ports = distinct_ports(2 * n)  # HTTP, then KV events
    with contextlib.ExitStack() as stack:
        servers, kv_events = [], {}
        stack.callback(stop_all, servers)  # the list as it is on exit
        for i, (port, kv_port) in enumerate(zip(ports[:n], ports[n:])):
            server = setup.server(cache_dir("logs") / f"replica-{stamp}-r{i}.log", port,
                                  start_timeout_s, replica_config(setup, i, kv_port, where[i]))
            servers.append(server)
            kv_events[server.base_url] = f"tcp://127.0.0.1:{kv_port}"
        console.print(f"Starting {n} vLLM {setup.env.vllm_version} replicas on ports "
                      f"{', '.join(map(str, ports[:n]))} (logs: {servers[0].log_path.parent})")
        started = time.monotonic()
        for server in servers:
            server.launch()
        for server in servers:
            server.wait_ready()
        start_s = time.monotonic() - started
        reporting = {cached_tokens_reporting(s.base_url, setup.config.served_name,
                                             auth_headers(setup.api_key)) for s in servers}
        if len(reporting) > 1:
            raise BenchError(f"the replicas report cached tokens differently: {reporting}")
        replicas = ReplicaSet(setup, servers, kv_events, start_s, reporting.pop())
        console.print(f"[green]✓[/] {n} replicas ready in {replicas.start_s:.0f}s")
        yield replicas


def _routes(target: Target) -> dict:
    """What the router forwards and what the replicas serve, as target metadata: a route a
    replica serves but the router does not forward is unavailable, with that reason."""
    headers = target.headers
    direct = find_routes(target.replicas[0].url, headers)
    forwarded, unavailable = {}, dict(direct.unavailable)
    for route in (CHAT_ROUTE, *ROUTES):
        status = probe_status(target.base_url, route, headers)
        forwarded[route] = status in _FORWARDED
        if not forwarded[route] and route not in unavailable:
            unavailable[route] = f"the router does not forward it ({status})"
    return {"routes": sorted(direct.available - set(unavailable)),
            "routes_unavailable": unavailable, "router_forwards": forwarded,
            "generate_fields": sorted(direct.generate_fields)}


@contextlib.contextmanager
def routed(replica_set: ReplicaSet, policy: str, console: Console,
           api_key: str | None = None) -> Iterator[Target]:
    """vllm-router with ``policy`` in front of the replicas, as a target; stopped on exit."""
    router_env = provision_router(console=console)
    setup = replica_set.setup
    servers = replica_set.servers
    config = RouterConfig([s.base_url for s in servers], policy,
                          kv_events=replica_set.kv_events if policy == KV_AWARE else {},
                          kv_block_size=setup.config.block_size,
                          kv_model=setup.config.served_name)
    router = ManagedRouter(router_env, config,
                           cache_dir("logs") / f"router-{log_stamp()}-{policy}.log")
    console.print(f"Starting vllm-router {router_env.info['version']} ({policy}) on port "
                  f"{router.port} (log: {router.log_path})")
    with router:
        metadata = {**setup.metadata(servers[0]), "server_url": router.base_url,
                    "router": {**router.metadata(), "log": str(router.log_path),
                               "rss_mib": group_rss_mib(router.proc.pid)},
                    "replicas": replica_set.metadata(),
                    "replicas_start_s": round(replica_set.start_s, 1)}
        target = Target(router.base_url, setup.config.served_name, setup.config.block_size,
                        setup.config.media_dir, metadata, api_key=api_key,
                        zero_cached_omitted=replica_set.reporting == WHEN_NONZERO,
                        replicas=replica_set.replicas)
        yield replace(target, metadata={**metadata, **_routes(target),
                                        "prompt_tokens_details": replica_set.reporting})


def _external_replicas(args: argparse.Namespace, console: Console) -> Target:
    """A running router and the replicas behind it (all checked; none managed)."""
    servers = [external_server(url, args.block_size, args.model, args.api_key, console,
                         "--replica-url") for url in args.replica_url]
    first = servers[0]
    for other in servers[1:]:
        for key in ("vllm_version", "model", "block_size"):
            if other.metadata[key] != first.metadata[key]:
                raise BenchError(f"--replica-url {other.base_url}: {key} "
                                 f"{other.metadata[key]} differs from {first.base_url}'s "
                                 f"{first.metadata[key]}")
    router = args.server_url.rstrip("/")
    replicas = tuple(Replica(f"r{i}", s.base_url, False) for i, s in enumerate(servers))
    metadata = {**first.metadata, "server_url": router,
                "router": {"managed": False, "url": router},
                "replicas": [{"name": r.name, "url": r.url, "managed": False} for r in replicas]}
    target = Target(router, first.model, first.block_size, None, metadata,
                    zero_cached_omitted=first.zero_cached_omitted, api_key=args.api_key,
                    replicas=replicas)
    return replace(target, metadata={**metadata, **_routes(target)})


def check_replica_args(args: argparse.Namespace) -> None:
    """Usage errors of the replica options (before anything starts)."""
    if args.replica_url and not args.server_url:
        raise BenchError("--replica-url needs --server-url (the router in front of them)")
    if args.replica_url and args.replicas:
        raise BenchError("--replicas starts replicas; --replica-url names running ones: "
                         "choose one")
    if args.router and not args.replicas:
        raise BenchError("--router chooses the policy of a managed router: it needs --replicas")
    if args.replicas and args.port is not None:
        raise BenchError("--port: the replicas and the router take free ports of their own")
    if args.replicas and args.server_url:
        raise BenchError("--replicas starts its own router: drop --server-url (or name "
                         "running replicas with --replica-url)")


@contextlib.contextmanager
def open_replicas(args: argparse.Namespace, console: Console) -> Iterator[Target]:
    """The replica target the options ask for; managed processes are stopped on exit."""
    check_replica_args(args)
    if args.replica_url:
        yield _external_replicas(args, console)
        return
    setup = engine_setup(args, console)
    with start_replicas(setup, args.replicas, args.start_timeout, console) as replica_set, \
            routed(replica_set, args.router or DEFAULT_POLICY, console, args.api_key) as target:
        yield target
