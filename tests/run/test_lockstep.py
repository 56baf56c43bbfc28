"""Two runs in lockstep (an A/B's sides): turns never overlap, step t of both sides ends
before step t+1 of either begins, the order of each pair of steps is balanced, a side that
leaves lets the other go on; against a fake server, each pass of one side runs right
before or after the same pass of the other, never at once (saltbench's runner, not vLLM)."""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from bench.engine.target import Target
from bench.measured.records import read_records
from bench.run.lockstep import Lockstep
from bench.run.session import RunSession, run_in_lockstep
from bench.run.settings import RunOptions
from bench.workload import generate, load_workload


async def _steps(lock: Lockstep, side: str, n: int, log: list, stop_at: int | None = None):
    for t in range(n):
        if t == stop_at:
            lock.leave(side)
        async with lock.turn(side):
            log.append(("start", side, t))
            await asyncio.sleep(0.001 * (1 + (t * 7 + len(side)) % 3))
            log.append(("end", side, t))


def test_turns_never_overlap_and_steps_advance_together():
    lock, log = Lockstep(("base", "new"), seed=5), []
    asyncio.run(lock.run({"base": _steps(lock, "base", 40, log),
                          "new": _steps(lock, "new", 40, log)}))
    assert len(log) == 160
    for i in range(0, 160, 2):  # every start is followed by its own end: one at a time
        assert log[i][0] == "start" and log[i + 1] == ("end", *log[i][1:])
    steps = [t for kind, _, t in log if kind == "start"]
    assert steps == sorted(steps)  # both sides' step t before either's step t+1
    firsts = [log[i][1] for i in range(0, 160, 4)]
    assert firsts == lock.firsts
    assert all(firsts[t] != firsts[t + 1] for t in range(0, 40, 2))  # pairs balanced
    assert {firsts[t] for t in range(0, 40, 2)} == {"base", "new"}  # and drawn


def test_during_wraps_every_turn_even_one_that_fails():
    """``during`` is entered with the side whose turn it is, right around its step, and
    left when the step ends, failed or not (an A/B continues the other side's server)."""
    log: list = []

    @contextlib.contextmanager
    def during(side):
        log.append(("enter", side))
        try:
            yield
        finally:
            log.append(("leave", side))

    lock = Lockstep(("base", "new"), seed=3, during=during)

    async def failing():
        try:
            async with lock.turn("new"):
                raise RuntimeError("boom")
        finally:
            lock.leave("new")

    async def both():
        return await asyncio.gather(_steps(lock, "base", 3, log), failing(),
                                    return_exceptions=True)

    assert isinstance(asyncio.run(both())[1], RuntimeError)
    assert ("enter", "new") in log and log[log.index(("enter", "new")) + 1] == ("leave", "new")
    for side, t in (("base", 0), ("base", 1), ("base", 2)):
        i = log.index(("start", side, t))
        assert log[i - 1] == ("enter", side) and log[i + 2] == ("leave", side)


def test_a_side_that_leaves_lets_the_other_go_on():
    lock, log = Lockstep(("base", "new"), seed=1), []

    async def both():
        await asyncio.wait_for(lock.run({"base": _steps(lock, "base", 10, log, stop_at=3),
                                         "new": _steps(lock, "new", 10, log)}), 10)

    asyncio.run(both())
    assert sum(1 for kind, side, _ in log if kind == "end" and side == "new") == 10
    assert sum(1 for kind, side, _ in log if kind == "end" and side == "base") == 10


def test_a_side_that_fails_does_not_hang_the_other():
    lock = Lockstep(("base", "new"), seed=2)

    async def broken():
        async with lock.turn("base"):
            raise RuntimeError("boom")

    async def both():
        await asyncio.wait_for(lock.run({"base": broken(),
                                         "new": _steps(lock, "new", 5, [])}), 10)

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(both())


SPEC = """
[workload]
requests = 6
"""


def test_runs_in_lockstep_take_turns_pass_by_pass(fake_server, tmp_path: Path):
    spec = tmp_path / "fake.toml"
    spec.write_text(textwrap.dedent(SPEC))
    workload = load_workload(generate(spec, out=tmp_path / "wl"))
    target = Target(fake_server.url, "fake", 32, None, {"managed": False, "block_size": 32})
    opts = RunOptions(paths=["chat"], warmup=1)
    quiet = Console(stderr=True, quiet=True)
    sessions = {side: RunSession(target, workload, opts, tmp_path / side,
                                 f"20261206-000000-ab-{side}-abcdef", quiet)
                for side in ("base", "new")}
    lock = Lockstep(("base", "new"), seed=0)
    results = run_in_lockstep(sessions, lock)
    assert all(not r["interrupted"] and not r["stopped"] for r in results.values())
    records = {side: {(r["pass"], r["request_id"]): r
                      for r in read_records(tmp_path / side / "records.jsonl")
                      if r["phase"] == "measure"} for side in ("base", "new")}
    assert records["base"].keys() == records["new"].keys() and len(records["base"]) == 12
    assert len(lock.firsts) == 2  # one step per pass, two passes (salt modes)
    # the passes take turns: never at once, the same pass of both sides before the next
    # (the two runners' clocks start within milliseconds of each other)
    spans = sorted((min(r["start_s"] for r in records[side].values() if r["pass"] == p),
                    max(r["end_s"] for r in records[side].values() if r["pass"] == p), p, side)
                   for side in records for p in (0, 1))
    assert [p for *_, p, _ in spans] == [0, 0, 1, 1]
    assert [side for *_, side in spans[::2]] == lock.firsts
    for (_, e0, *_), (s1, *_) in zip(spans, spans[1:]):
        assert s1 >= e0 - 0.005
