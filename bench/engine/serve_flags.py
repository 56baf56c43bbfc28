"""Which ``vllm serve`` flags an engine environment accepts, read from its own help.

The help is asked for once per environment and vLLM version, and cached as JSON:
next to the environment marker for a provisioned environment, else (``--engine-python``)
under the saltbench cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

from bench.cachedirs import cache_dir
from bench.docio import write_json
from bench.engine.environment import EngineEnv
from bench.errors import BenchError

CACHE_FILE = "saltbench-serve-flags.json"
#: The module ``ManagedServer`` starts; its ``serve --help`` lists the flags.
ENTRY = "vllm.entrypoints.cli.main"
#: Newer vLLMs list only config groups under plain ``--help``; older ones refuse ``=all``.
_HELP_ARGS = ("--help=all", "--help")
#: An argparse option line: the invocation, then two spaces or the end of the line.
_OPTION_LINE = re.compile(r"^ {2,6}(-.*?)(?: {2,}|$)")
_LONG = re.compile(r"^--[A-Za-z0-9][\w.-]*")
#: vLLM's refusal to build its config where it finds no device (a CUDA build on a machine
#: without a GPU); its help then lists the same flags under the CPU platform.
NO_DEVICE, CPU_PLATFORM = "Failed to infer device type", {"VLLM_TARGET_DEVICE": "cpu"}


def parse_help(text: str) -> frozenset[str]:
    """The long options (``--name``) that argparse help text lists."""
    flags = set()
    for line in text.splitlines():
        match = _OPTION_LINE.match(line)
        if not match:
            continue
        for part in match[1].split(", "):
            long = _LONG.match(part.strip())
            if long:
                flags.add(long[0])
    return frozenset(flags)


def help_text(python: Path) -> str:
    """``serve --help=all`` (or plain ``--help`` where ``=all`` is refused) of ``python``'s vLLM
    (asked under vLLM's CPU platform where it finds no device)."""
    def ask(arg: str, extra: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-m", ENTRY, "serve", arg], capture_output=True,
                              text=True, timeout=600, stdin=subprocess.DEVNULL,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                                   **extra})

    errors, extra = [], {}
    for arg in _HELP_ARGS:
        proc = ask(arg, extra)
        if proc.returncode != 0 and NO_DEVICE in proc.stderr and not extra:
            extra = CPU_PLATFORM
            proc = ask(arg, extra)
        if proc.returncode == 0 and "--port" in parse_help(proc.stdout):
            return proc.stdout
        errors.append(f"serve {arg}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    raise BenchError(f"engine python {python}: cannot list the serve flags:\n" + "\n".join(errors))


def cache_path(env: EngineEnv) -> Path:
    """Next to the marker of a provisioned environment; else keyed by the interpreter path."""
    if env.info.get("spec"):
        return env.python.parent.parent / CACHE_FILE
    key = hashlib.sha256(str(env.python.absolute()).encode()).hexdigest()[:12]
    return cache_dir("serve-flags") / f"{key}.json"


def serve_flags(env: EngineEnv) -> frozenset[str]:
    """The long options ``vllm serve`` accepts in ``env`` (cached per vLLM version)."""
    path = cache_path(env)
    try:
        cached = json.loads(path.read_text())
        if cached.get("vllm_version") == env.vllm_version:
            return frozenset(cached["flags"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    flags = parse_help(help_text(env.python))
    write_json(path, {"vllm_version": env.vllm_version, "flags": sorted(flags)})
    return flags
