"""The tenant boundary under several configurations: which channels each one closes, and
what it costs.

A configuration is a name, extra ``vllm serve`` arguments and a client uuid mode
(:data:`bench.vocab.CLIENT_UUIDS`). Per configuration a managed server starts with its
arguments (checked against the version's flags: one it lacks is ``n/a`` with the reason),
the isolation experiment runs into its own directory, and the server stops. The summary per
configuration: each channel's worst verdict and how many cells have each verdict, the
timing rows' paired AUCs, and the cost: median TTFT of a media request another tenant sent
before (what sharing the media caches saves) and of one never seen. ``mitigations.json`` is
rewritten after every configuration.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from bench import SCHEMA_VERSION
from bench.docio import write_json
from bench.engine.open import open_target
from bench.errors import BenchError
from bench.isolation.experiment import IsolationOptions, isolate
from bench.outputs import new_run_id
from bench.verdicts.boundary import CROSS_TENANT, boundary_rows, channel_worst, exit_code
from bench.vocab import CHANNELS, CLIENT_UUIDS, NOT_AVAILABLE, PER_TENANT

MITIGATIONS_FILE, MITIGATIONS_KIND = "mitigations.json", "saltbench-mitigations"
CLIENT_KEY = "client-uuids="


@dataclass(frozen=True)
class Config:
    name: str
    serve_args: tuple[str, ...] = ()
    client_uuids: str = CLIENT_UUIDS[0]


#: What ``mitigations`` measures when no ``--config`` is given: stock vLLM, its multimodal
#: processor cache off, and uuids namespaced per tenant by the client.
DEFAULT_CONFIGS = (Config("default"),
                   Config("no-processor-cache", ("--mm-processor-cache-gb=0",)),
                   Config("per-tenant-uuids", client_uuids=PER_TENANT))


def parse_config(text: str) -> Config:
    """``NAME=WORDS``: ``--flag[=value]`` words are serve arguments, ``client-uuids=MODE``
    sets the client's uuid mode."""
    name, eq, rest = text.partition("=")
    if not eq or not name.strip():
        raise argparse.ArgumentTypeError(f"--config {text!r}: write NAME=ARGS, e.g. "
                                         "no-cache=--mm-processor-cache-gb=0")
    serve, client = [], CLIENT_UUIDS[0]
    for word in shlex.split(rest):
        if word.startswith(CLIENT_KEY):
            client = word[len(CLIENT_KEY):]
            if client not in CLIENT_UUIDS:
                raise argparse.ArgumentTypeError(
                    f"--config {name}: client-uuids must be one of {', '.join(CLIENT_UUIDS)}")
        elif word.startswith("--"):
            serve.append(word)
        else:
            raise argparse.ArgumentTypeError(
                f"--config {name}: {word!r} is neither a --serve-flag nor {CLIENT_KEY}MODE")
    return Config(name.strip(), tuple(serve), client)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(config: Config, isolation: dict) -> dict:
    """One configuration's row: per channel its worst verdict and verdict counts, the timing
    rows' AUCs, and the cost in TTFT of not sharing media across tenants."""
    rows = boundary_rows(isolation)
    timed = [r for r in isolation["side_channel"] if r["kind"] == CROSS_TENANT]
    aucs = [r["auc"] for r in timed if r.get("auc") is not None]
    return {
        "config": config.name, "serve_args": list(config.serve_args),
        "client_uuids": config.client_uuids, "status": "ok",
        "channels": {c: {"worst": channel_worst(rows, c),
                         "counts": dict(Counter(r[c] for r in rows if r[c] != NOT_AVAILABLE))}
                     for c in CHANNELS},
        "timing_auc": {"min": min(aucs), "max": max(aucs)} if aucs else None,
        "ttft_seen_ms": _median([t for r in timed for t in r["ttft_b_ms"]]),
        "ttft_unseen_ms": _median([t for r in timed for t in r["ttft_a_ms"]]),
        "pairs": sum(r["n_a"] for r in timed),
        "exit_code": exit_code(isolation),
        "server_start_s": isolation["metadata"]["target"].get("server_start_s"),
        "duration_s": isolation["duration_s"],
    }


def run_mitigations(args: argparse.Namespace, configs: list[Config], opts: IsolationOptions,
                    out: Path, console: Console,
                    progress: Callable[[dict], None] | None = None) -> dict:
    """Every configuration in turn; a configuration whose server cannot start (or whose
    flags this version lacks) is ``n/a`` with the reason and the others still run."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {"schema_version": SCHEMA_VERSION, "kind": MITIGATIONS_KIND, "rows": [],
           "isolation_options": {**opts.__dict__}, "complete": False}
    for config in configs:
        run_dir = out / config.name
        try:
            target_args = argparse.Namespace(**{**vars(args),
                                                "serve_args": list(config.serve_args)})
            with open_target(target_args, console) as target:
                iso = isolate(target, replace(opts, client_uuids=config.client_uuids),
                              run_dir, new_run_id("isolation"), console)
            row = {**summarize(config, iso), "dir": str(run_dir)}
        except BenchError as exc:
            row = {"config": config.name, "serve_args": list(config.serve_args),
                   "client_uuids": config.client_uuids, "status": NOT_AVAILABLE,
                   "reason": str(exc)}
        doc["rows"].append(row)
        write_json(out / MITIGATIONS_FILE, doc)
        if progress is not None:
            progress(row)
    doc["complete"] = True
    write_json(out / MITIGATIONS_FILE, doc)
    return doc
