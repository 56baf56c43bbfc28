"""vLLM's router (``vllm-router``): its cached environment and the managed router process.

The router is a Rust binary shipped in a wheel; it lives in its own virtual environment
(``<cache>/routers/vllm-router-<version>``), provisioned like an engine environment
(:func:`bench.engine.provision.cached_env`), and runs like a managed vLLM server (its own
process group under the reaper, stopped with it).
"""

from __future__ import annotations

import collections
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from bench.cachedirs import cache_dir
from bench.engine.provision import Pip, cached_env
from bench.engine.server import ManagedServer, free_port
from bench.errors import BenchError

ROUTER_VERSION = "0.1.17"
#: Policies saltbench knows; ``kv_aware`` also needs the replicas' KV events.
POLICIES = ("round_robin", "random", "consistent_hash", "power_of_two", "cache_aware",
            "kv_aware", "sticky_least_loaded")
KV_AWARE = "kv_aware"
DEFAULT_POLICY = "cache_aware"  # vllm-router's own default
#: The router's debug line for each kv_aware decision, and its outcome.
_KV_DECISION = re.compile(r'KV prefix decision\S*\s+\S*outcome\S*="(?P<outcome>[^"]+)"')
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class RouterEnv:
    """A provisioned router environment."""

    root: Path
    info: dict  # spec, version, policies its help lists, provision_s

    @property
    def executable(self) -> Path:
        return self.root / "bin" / "vllm-router"


def policies_in_help(text: str) -> list[str]:
    """The ``--policy`` choices a router's help lists (``--policy {a,b,...}``)."""
    match = re.search(r"--policy \{([^}]+)\}", text)
    return match[1].split(",") if match else []


def provision_router(version: str = ROUTER_VERSION, console: Console | None = None) -> RouterEnv:
    """The cached ``vllm-router`` environment, built first if needed."""
    root = cache_dir("routers") / f"vllm-router-{version}"

    def build(python: Path, pip: Pip) -> dict:
        pip(["install", f"vllm-router=={version}"], f"installing vllm-router=={version}")
        proc = subprocess.run([str(root / "bin" / "vllm-router"), "--help"], capture_output=True,
                              text=True, timeout=60)
        if proc.returncode != 0:
            raise BenchError(f"vllm-router=={version} --help failed (exit {proc.returncode}):\n"
                             f"{proc.stderr[-2000:]}")
        return {"spec": f"vllm-router=={version}", "version": version,
                "policies": policies_in_help(proc.stdout)}

    info = cached_env(root, f"router environment vllm-router=={version}", build,
                      console or Console(stderr=True))
    return RouterEnv(root, info)


@dataclass
class RouterConfig:
    """How the router is started (recorded with every result)."""

    worker_urls: list[str]
    policy: str
    #: kv_aware: worker URL -> the ZMQ endpoint its KV events are published on.
    kv_events: dict[str, str] = field(default_factory=dict)
    kv_block_size: int = 32
    kv_model: str | None = None
    metrics_port: int = field(default_factory=free_port)

    def flags(self, port: int, supported: frozenset[str] | None = None,
              engine: str = "vllm-router") -> list[str]:
        """The router's arguments (``supported`` and ``engine``: as for a vLLM server)."""
        args = ["--host", "127.0.0.1", "--port", str(port), "--worker-urls", *self.worker_urls,
                "--policy", self.policy, "--prometheus-port", str(self.metrics_port),
                "--log-level", "debug"]  # debug: kv_aware logs each decision's outcome
        if self.policy == KV_AWARE:
            for url, endpoint in self.kv_events.items():
                args += ["--kv-event-source", f"{url}={endpoint}"]
            args += ["--kv-event-block-size", str(self.kv_block_size)]
            if self.kv_model:
                args += ["--kv-event-model", self.kv_model]
        return args

    def env(self) -> dict[str, str]:
        return {"NO_COLOR": "1"}


class ManagedRouter(ManagedServer):
    """``vllm-router`` in its own process group, stopped like a vLLM server."""

    label = "vllm-router"

    def __init__(self, env: RouterEnv, config: RouterConfig, log_path: Path,
                 start_timeout_s: float = 120.0) -> None:
        if config.policy not in env.info["policies"]:
            raise BenchError(f"--router {config.policy}: vllm-router {env.info['version']} "
                             f"offers {', '.join(env.info['policies'])}")
        super().__init__(env.executable, config, log_path, start_timeout_s=start_timeout_s)
        self.env = env

    @property
    def command(self) -> list[str]:
        return [str(self.python), *self.flags]

    def metadata(self) -> dict:
        """What every result records about the router."""
        return {"managed": True, "version": self.env.info["version"],
                "policy": self.config.policy, "flags": self.flags,
                "start_s": round(self.start_s or 0.0, 1)}


def kv_decisions(log_path: Path) -> dict[str, int]:
    """How many kv_aware decisions the router logged, per outcome (``cache_salt``: the
    router declined KV affinity because the request carried a salt)."""
    try:
        text = _ANSI.sub("", log_path.read_text(errors="replace"))
    except OSError:
        return {}
    return dict(collections.Counter(m["outcome"] for m in _KV_DECISION.finditer(text)))
