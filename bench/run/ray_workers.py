"""``run --workers N --ray ADDRESS``: the measured requests of a pass sent from N Ray actors
spread over a cluster's nodes, instead of N processes of this machine.

The split is :mod:`bench.run.workers`'s (worker k owns slots j with j % N == k). The actors
are placed one per bundle of a placement group (``STRICT_SPREAD``: one per node while there
are nodes enough, else ``SPREAD``), each with the workload shipped to its node. Every
actor's clock is aligned to the driver's: the offset between its ``perf_counter`` and the
driver's is measured by round trips (the shortest of several; half of it is the
uncertainty) and the actor sends on the common schedule and stamps its records on the
driver's clock. An actor returns its records when its share is done, each record naming
its sender (``sender``: node and host); the driver merges them in the order they finished.
An actor that is lost (its node died) leaves its whole share recorded as failed
(``lost``, with Ray's reason) and stops the run (what is left is recorded unsent): every
request is accounted for. Each pass records its senders, their offsets and any loss
(``senders``).
"""

from __future__ import annotations

import asyncio
import heapq
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.measured.records import PassInfo, iter_records
from bench.ray_support import connect, land, node, ray_module, ship
from bench.run.settings import RunOptions
from bench.run.workers import LEAD_S, Task, worker_count

#: Round trips per actor to measure its clock offset.
CLOCK_PINGS = 7
#: How long the cluster may take to place the senders (s).
PLACE_TIMEOUT_S = 60.0
#: ``lost(info, worker, reason)``: record the share of a worker that was lost as failed.
Lost = Callable[[PassInfo, int, str], None]


class Sender:
    """A Ray actor that sends one worker's shares (its class is made remote on use)."""

    def __init__(self, shipped: dict) -> None:
        self.where, self.workload = node(), land(shipped)

    def clock(self) -> float:
        return time.perf_counter()

    def info(self) -> dict:
        return self.where

    def measure(self, task: Task, plan: Any, info: PassInfo, worker: int, start: float,
                offset: float) -> tuple[str | None, list[dict]]:
        """Run ``task`` on this node's clock (the driver's ``start`` and origin shifted by
        ``offset``); why it stopped and its records, each naming this sender."""
        with tempfile.TemporaryDirectory(prefix="saltbench-sender-") as tmp:
            plan = replace(plan, workload=self.workload, out_dir=Path(tmp), t0=plan.t0 + offset,
                           deadline=None if plan.deadline is None else plan.deadline + offset)
            part = Path(tmp) / "part.jsonl"
            stopped = task(plan, info, worker, start + offset, part)
            records = list(iter_records(part)) if part.exists() else []
        sender = {"node": self.where["node_id"], "host": self.where["node_ip"]}
        return stopped, [{**r, "sender": sender} for r in records]


class RayWorkers:
    """Ray actors in place of :class:`bench.run.workers.Workers`; a context manager."""

    def __init__(self, opts: RunOptions, workload: Any, task: Task, lost: Lost) -> None:
        self.opts, self.workload, self.task, self.lost = opts, workload, task, lost
        self.count = worker_count(opts)
        self.actors: list = []
        self.senders: list[dict] = []

    def __bool__(self) -> bool:
        return self.count > 1

    def __enter__(self) -> RayWorkers:
        if not self:
            return self
        ray = connect(self.opts.ray)
        try:
            self._start(ray)
        except BaseException:
            ray.shutdown()
            raise
        return self

    def _start(self, ray) -> None:
        """Place the actors (a BenchError when the cluster cannot within PLACE_TIMEOUT_S),
        ship them the workload, align their clocks."""
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        strategy = "STRICT_SPREAD" if self.count <= nodes else "SPREAD"
        group = placement_group([{"CPU": 1}] * self.count, strategy=strategy)
        try:
            ray.get(group.ready(), timeout=PLACE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise BenchError(f"--ray {self.opts.ray}: the cluster ({nodes} node(s)) could not "
                             f"place {self.count} senders of one free CPU each "
                             f"({strategy}) within {PLACE_TIMEOUT_S:g} s") from None
        shipped, actor = ray.put(ship(self.workload)), ray.remote(num_cpus=1, max_restarts=0)(Sender)
        self.actors = [actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=k)).remote(shipped) for k in range(self.count)]
        self.senders = [{"worker": k, **self._align(a)} for k, a in enumerate(self.actors)]

    def _align(self, actor) -> dict:
        """Where ``actor`` runs and its clock's offset from the driver's (seconds to add
        to a driver time to get the actor's), from the shortest of several round trips."""
        ray = ray_module()
        where = ray.get(actor.info.remote())
        best = None
        for _ in range(CLOCK_PINGS):
            sent = time.perf_counter()
            theirs = ray.get(actor.clock.remote())
            back = time.perf_counter()
            if best is None or back - sent < best[0]:
                best = (back - sent, theirs - (sent + back) / 2)
        return {"node": where["node_id"], "host": where["node_ip"],
                "clock_offset_s": round(best[1], 6), "offset_uncertainty_s": round(best[0] / 2, 6)}

    def __exit__(self, *exc: object) -> None:
        if self:
            ray_module().shutdown()

    async def measure(self, plan: object, info: PassInfo, take: Callable[[dict], None]
                      ) -> list[str]:
        """Send the pass from the actors; hand their records to ``take`` in the order they
        finished; a lost actor's share is recorded failed. Why the run stopped anywhere."""
        start = time.perf_counter() + LEAD_S
        refs = [a.measure.remote(self.task, plan, info, k, start, s["clock_offset_s"])
                for k, (a, s) in enumerate(zip(self.actors, self.senders))]
        outcomes = await asyncio.gather(*refs, return_exceptions=True)
        info.senders = [dict(s) for s in self.senders]
        stopped, parts = [], []
        for k, outcome in enumerate(outcomes):
            if isinstance(outcome, BaseException):
                reason = (f"sender {k} on {self.senders[k]['host']} lost "
                          f"({type(outcome).__name__}): "
                          f"{str(outcome).strip().splitlines()[0][:300]}")
                info.senders[k]["lost"] = reason
                continue
            why, records = outcome
            stopped += [why] if why else []
            parts.append(records)
        for r in heapq.merge(*parts, key=lambda r: r["end_s"]):
            take(r)
        for k, s in enumerate(info.senders):
            if "lost" in s:  # its share failed; the run stops: its load is no longer sent
                self.lost(info, k, s["lost"])
                stopped.append(s["lost"])
        return stopped
