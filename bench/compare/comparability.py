"""Whether two runs measured the same thing: the fields that must match, and the ones the
user says are the point of the comparison (``--allow target.vllm_version``)."""

from __future__ import annotations

from bench.errors import BenchError

#: Metadata fields (dotted paths) that must match, unless allowed.
FIELDS = (
    "workload.spec.sha256", "workload.seed", "workload.counts.requests",
    "target.model", "target.model_info.parameters", "target.block_size", "target.flags",
    "target.vllm_version",
    "machine.cpu", "machine.cpu_count", "target.gpus.names", "target.gpus.count",
    "options.rate", "options.burstiness", "options.max_concurrency", "options.warmup",
    "options.prime", "options.timeout_s", "options.media_url", "options.audio_part",
    "options.seed", "options.goodput",
)
#: Flags whose value names this machine or this process, not how the engine behaves.
_LOCAL_FLAGS = ("--port", "--host", "--allowed-local-media-path")


def _get(meta: dict, dotted: str) -> object:
    value: object = meta
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def engine_flags(target: dict) -> dict[str, str | None] | None:
    """The server's flags as {flag: value}, without local ones and without the flags either
    version lacks (``flags_dropped``: adapted to the version, not chosen)."""
    flags = target.get("flags")
    if flags is None:
        return None
    out: dict[str, str | None] = {}
    for i, arg in enumerate(flags):
        if arg.startswith("--"):
            value = flags[i + 1] if i + 1 < len(flags) and not flags[i + 1].startswith("--") else None
            out[arg] = value
    return {k: v for k, v in out.items() if k not in _LOCAL_FLAGS}


def differences(base: dict, new: dict) -> dict[str, tuple[object, object]]:
    """The checked fields whose values differ between two runs' metadata."""
    dropped = set(base.get("target", {}).get("flags_dropped") or []) | set(
        new.get("target", {}).get("flags_dropped") or [])
    out = {}
    for name in FIELDS:
        if name == "target.flags":
            a, b = engine_flags(base.get("target", {})), engine_flags(new.get("target", {}))
            if a is not None and b is not None:
                a = {k: v for k, v in a.items() if k not in dropped}
                b = {k: v for k, v in b.items() if k not in dropped}
        else:
            a, b = _get(base, name), _get(new, name)
        if a != b:
            out[name] = (a, b)
    return out


def _allowed(name: str, allow: list[str]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allow)


def check(base: dict, new: dict, allow: list[str]) -> dict[str, tuple[object, object]]:
    """The allowed differences; a BenchError naming every other one."""
    unknown = [a for a in allow if not any(_allowed(f, [a]) for f in FIELDS)]
    if unknown:
        raise BenchError(f"--allow {', '.join(unknown)}: not a compared field; known: "
                         + ", ".join(FIELDS))
    found = differences(base, new)
    refused = {k: v for k, v in found.items() if not _allowed(k, allow)}
    if refused:
        raise BenchError("the runs are not comparable:\n" + describe(refused)
                         + "\nif a difference is the point of the comparison, say so with "
                         + " ".join(f"--allow {k}" for k in refused))
    return {k: v for k, v in found.items() if _allowed(k, allow)}


def describe(found: dict[str, tuple[object, object]]) -> str:
    """One line per differing field: its name and both values."""
    return "\n".join(f"  {k}: {_short(a)} vs {_short(b)}" for k, (a, b) in found.items())


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
