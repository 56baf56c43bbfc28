"""Two runs in lockstep: an A/B's sides take turns pass by pass.

A step is one pass of a run (its warm-up, counter scrapes, measured requests and layouts).
Pass ``t`` of one side and pass ``t`` of the other run one after the other, never at once,
the order drawn for even passes and reversed for the next (each pair is balanced). Both
sides run the same workload and options, so their passes match, and a request's twin on
the other side is sent about a pass before or after it (1.5 s here: a block of 8 passes
per side took about 24 s with the tiny model), not a whole block: drift of the machine
over more than a pass weighs on both alike. Each pass opens with its own warm-up requests;
whatever the other side left running (an idle vLLM worker busy-polls for a second) an A/B
pauses around each turn (``during``). A side that stops (its server gone) or ends leaves:
the other goes on alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AbstractContextManager
from typing import Any


class Lockstep:
    """Turns of two sides (see the module docstring)."""

    def __init__(self, sides: Sequence[str], seed: int,
                 during: Callable[[str], AbstractContextManager] | None = None) -> None:
        if len(sides) != 2:
            raise ValueError(f"lockstep takes two sides, got {list(sides)}")
        self.sides = tuple(sides)
        #: Entered with the side whose turn it is, around its step (an A/B pauses the
        #: other side's server for it).
        self.during = during
        self.rng = random.Random(seed)
        self.done = dict.fromkeys(self.sides, 0)  # steps finished per side
        self.firsts: list[str] = []  # the side that goes first at each step
        self.gone: set[str] = set()
        self._changed = asyncio.Event()

    def first(self, step: int) -> str:
        """The side that goes first at ``step`` (drawn for even steps, the other one next)."""
        while len(self.firsts) <= step:
            n = len(self.firsts)
            self.firsts.append(self.rng.choice(self.sides) if n % 2 == 0 else
                               self.other(self.firsts[n - 1]))
        return self.firsts[step]

    def other(self, side: str) -> str:
        return self.sides[1 - self.sides.index(side)]

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def leave(self, side: str) -> None:
        """``side`` takes no more turns (it stopped or ended): the other goes on alone."""
        if side not in self.gone:
            self.gone.add(side)
            self._notify()

    def _may_go(self, side: str, step: int) -> bool:
        other = self.other(side)
        return other in self.gone or self.done[other] >= step + (self.first(step) != side)

    @contextlib.asynccontextmanager
    async def turn(self, side: str) -> AsyncIterator[None]:
        """``side``'s next step: waits until the other side has finished its previous step
        (where ``side`` goes first) or this one (where it goes second), or has left."""
        if side in self.gone:
            yield
            return
        step = self.done[side]
        while not self._may_go(side, step):
            await self._changed.wait()
        try:
            with self.during(side) if self.during else contextlib.nullcontext():
                yield
        finally:
            self.done[side] += 1
            self._notify()

    async def run(self, runs: dict[str, Coroutine[Any, Any, Any]]) -> dict[str, Any]:
        """Run both sides' coroutines together, each leaving when it ends; their results."""
        async def one(side: str, coro: Coroutine[Any, Any, Any]) -> Any:
            try:
                return await coro
            finally:
                self.leave(side)

        results = await asyncio.gather(*(one(s, c) for s, c in runs.items()))
        return dict(zip(runs, results))
