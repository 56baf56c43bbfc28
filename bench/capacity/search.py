"""The highest load that meets a service-level objective: a bracketing search over probes.

A probe sends ``requests`` requests at one load (a request rate) and counts those within the
objectives (:mod:`bench.goodput`). Probes at one load are pooled. A load *looks* like it
meets the target attainment when its pooled share of good requests is at least the target,
and it *meets* (or *fails*) with confidence when the Wilson interval of that share lies at
or above (wholly below) the target.

The search grows (or shrinks) the load by ``factor`` from ``start`` until one load looks
like it meets and a higher one looks like it fails, halves that bracket geometrically
until the failing load is within ``1 + tolerance`` of the meeting one, then probes its ends
again (up to ``max_requests`` each) until each is decided with confidence; a re-probed end
that changes its look moves the bracket. The capacity it states is confident only: at least
the highest load that met with confidence, below the lowest higher load that failed with
confidence. An end it could not decide is None, with the requests a load would need.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from bench.stats import wilson_interval

#: Why a search stopped.
CONVERGED, MAX_PROBES = "converged", "max-probes"
ABOVE_MAX, BELOW_MIN = "meets at the highest load", "fails at the lowest load"
#: A load's state.
MEETS, FAILS, UNSURE = "meets", "fails", "unsure"


@dataclass(frozen=True)
class SearchSettings:
    """How the search moves: the target attainment, first load, bracket growth and width,
    requests per probe and per load, and the confidence of a decided load."""

    target: float = 0.99
    start: float = 1.0
    factor: float = 2.0
    tolerance: float = 0.10  # the bracket is narrow when high / low <= 1 + this
    requests: int = 100
    max_requests: int = 800  # per load, over its probes
    max_probes: int = 24
    min_rate: float = 0.01
    max_rate: float = 10_000.0
    level: float = 0.95


@dataclass
class Load:
    """One load's probes pooled."""

    rate: float
    sent: int = 0
    good: int = 0

    def looks_met(self, target: float) -> bool:
        return self.sent > 0 and self.good >= target * self.sent

    def state(self, settings: SearchSettings) -> str:
        low, high = wilson_interval(self.good, self.sent, settings.level)
        return MEETS if low >= settings.target else FAILS if high < settings.target else UNSURE


def requests_to_show(target: float, level: float = 0.95) -> int:
    """The fewest requests, all good, whose attainment meets ``target`` with confidence."""
    n = 1
    while wilson_interval(n, n, level)[0] < target:
        n *= 2
    lo, hi = n // 2, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if wilson_interval(mid, mid, level)[0] >= target else (mid, hi)
    return hi


@dataclass
class Capacity:
    """The search's answer: every probe in order, each load pooled, and why it stopped."""

    settings: SearchSettings
    probes: list[tuple[float, int, int]] = field(default_factory=list)  # rate, sent, good
    loads: dict[float, Load] = field(default_factory=dict)
    stopped: str = ""

    def _rates(self, state: str) -> list[float]:
        return sorted(r for r, load in self.loads.items() if load.state(self.settings) == state)

    @property
    def low(self) -> float | None:
        """The highest load that met the target with confidence (None: none did)."""
        met = self._rates(MEETS)
        return met[-1] if met else None

    @property
    def high(self) -> float | None:
        """The lowest load above :attr:`low` that failed with confidence (None: none did)."""
        failed = [r for r in self._rates(FAILS) if r > (self.low or 0.0)]
        return failed[0] if failed else None

    @property
    def monotone(self) -> bool:
        """No load failed with confidence below one that met with confidence."""
        return not [r for r in self._rates(FAILS) if r < (self.low or 0.0)]

    def to_dict(self) -> dict:
        s = self.settings
        return {"settings": asdict(s), "low": self.low, "high": self.high,
                "monotone": self.monotone, "stopped": self.stopped,
                "requests_to_show_target": requests_to_show(s.target, s.level),
                "loads": [{**asdict(load), "state": load.state(s),
                           "attainment": load.good / load.sent if load.sent else None,
                           "interval": wilson_interval(load.good, load.sent, s.level)}
                          for load in sorted(self.loads.values(), key=lambda x: x.rate)],
                "probes": [{"rate": r, "sent": n, "good": g} for r, n, g in self.probes]}


def _next_rate(cap: Capacity) -> float | str:
    """The load to probe next, or why the search stops."""
    s = cap.settings
    looks = {r: load.looks_met(s.target) for r, load in cap.loads.items()}
    met = [r for r, ok in looks.items() if ok]
    lo = max(met) if met else None
    above = [r for r, ok in looks.items() if not ok and r > (lo or 0.0)]
    hi = min(above) if above else None
    if lo is None:
        rate = min(cap.loads) / s.factor
        return rate if rate >= s.min_rate else BELOW_MIN
    if hi is None:
        rate = max(cap.loads) * s.factor
        return rate if rate <= s.max_rate else ABOVE_MAX
    if hi / lo > 1 + s.tolerance:
        return math.sqrt(lo * hi)
    for end in (lo, hi):
        load = cap.loads[end]
        if load.state(s) == UNSURE and load.sent + s.requests <= s.max_requests:
            return end
    return CONVERGED


def step(cap: Capacity, measure: Callable[[float, int], tuple[int, int]]) -> bool:
    """Probe ``cap``'s next load with ``measure(rate, requests) -> (sent, good)``; False
    (and why, in ``cap.stopped``) when the search has ended."""
    s = cap.settings
    rate = _next_rate(cap) if cap.probes else float(s.start)
    if isinstance(rate, str):
        cap.stopped = rate
        return False
    if len(cap.probes) >= s.max_probes:
        cap.stopped = MAX_PROBES
        return False
    sent, good = measure(rate, s.requests)
    cap.probes.append((rate, sent, good))
    load = cap.loads.setdefault(rate, Load(rate))
    load.sent += sent
    load.good += good
    return True


def search(measure: Callable[[float, int], tuple[int, int]],
           settings: SearchSettings) -> Capacity:
    """Search with ``measure(rate, requests) -> (sent, good)``; see the module docstring."""
    cap = Capacity(settings)
    while step(cap, measure):
        pass
    return cap


def search_interleaved(measures: dict[str, Callable[[float, int], tuple[int, int]]],
                       settings: SearchSettings, seed: int = 0) -> dict[str, Capacity]:
    """Several searches on one server in rounds: each round every unfinished search probes
    once, in an order drawn per round, so that the server's drift (warming up, other load)
    weighs on all of them alike rather than on whichever ran first."""
    caps = {name: Capacity(settings) for name in measures}
    rng = random.Random(seed)
    active = list(measures)
    while active:
        rng.shuffle(active)
        active = [name for name in active if step(caps[name], measures[name])]
    return caps
