"""``matrix --ray ADDRESS``: the engines of a matrix side by side on a Ray cluster.

Each engine is one Ray task that asks for what its server needs (GPUs for a CUDA engine,
``--ray-cpus`` CPUs for a CPU one), so that the scheduler places the engines on different
nodes when one node cannot hold two. On its node the task provisions the engine (cached per
node), takes the driver's workload (its files, through Ray's object store), serves, runs and
isolates as :func:`bench.campaigns.engine_run.one_engine` does, and returns its entry with the
engine's directory packed; the driver unpacks it where a serial matrix would have written
it. A task is never retried: an engine whose node dies or whose task fails is ``n/a`` with
Ray's reason, and the other engines go on.

Every node needs saltbench importable by the same Python (the same image, or a Ray runtime
environment): see docs/cluster.md.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from bench.campaigns.engine_run import one_engine
from bench.engine.spec import EngineSpec
from bench.isolation.experiment import IsolationOptions
from bench.ray_support import connect, land, node, pack, ship, unpack
from bench.run.settings import RunOptions
from bench.workload import Workload


def engine_task(args: argparse.Namespace, spec: EngineSpec, shipped: dict,
                opts: RunOptions, iso: IsolationOptions | None) -> tuple[dict, bytes]:
    """On a node: one engine's matrix entry and its directory, packed."""
    where, workload = node(), land(shipped)
    with tempfile.TemporaryDirectory(prefix="saltbench-engine-") as tmp:
        out = Path(tmp) / spec.slug
        entry = one_engine(args, spec, workload, opts, iso, out, Console(stderr=True))
        return {**entry, **where}, pack(out) if out.exists() else b""


def _resources(args: argparse.Namespace, spec: EngineSpec) -> dict:
    """What an engine's task asks the cluster for: its server's GPUs or CPUs."""
    if spec.is_cpu:
        return {"num_cpus": args.ray_cpus, "num_gpus": 0}
    return {"num_cpus": 1, "num_gpus": args.tensor_parallel_size or 1}


def run_on_ray(args: argparse.Namespace, workload: Workload, opts: RunOptions,
               iso: IsolationOptions | None, out: Path, console: Console,
               done: Callable[[int, dict], None]) -> None:
    """Every engine of ``args.engines`` as a Ray task on the cluster at ``args.ray``;
    ``done(i, entry)`` as engine ``i`` finishes (its directory already unpacked)."""
    ray = connect(args.ray)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        console.print(f"Ray cluster {args.ray}: {len(nodes)} node(s); "
                      f"{len(args.engines)} engine(s) as tasks")
        task, shipped = ray.remote(max_retries=0)(engine_task), ray.put(ship(workload))
        pending = {task.options(**_resources(args, spec)).remote(
            args, spec, shipped, opts, iso): i for i, spec in enumerate(args.engines)}
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ref)
            spec, target = args.engines[i], out / args.engines[i].slug
            try:
                entry, packed = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - Ray's errors name why the task failed
                reason = str(exc).strip().splitlines()[0][:500]
                entry = {"engine": str(spec), "status": "n/a",
                         "error": f"Ray task failed ({type(exc).__name__}): {reason}"}
                console.print(f"[red]{spec}: {entry['error']}[/]")
            else:
                if packed:
                    unpack(packed, target)
                if entry.get("report"):
                    entry["report"] = str(target / Path(entry["report"]).name)
            done(i, {**entry, "dir": str(target)})
    finally:
        ray.shutdown()
