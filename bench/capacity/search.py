"""The highest load that meets a service-level objective: a search over probes.

A probe sends ``requests`` requests at one load (a request rate) and counts those within the
objectives (:mod:`bench.goodput`). A load *looks* like it meets the target attainment when
its probes' pooled share of good requests is at least the target.

The search grows (or shrinks) the load by ``factor`` from ``start`` until one load looks
like it meets and a higher one looks like it fails, and halves that bracket geometrically
until the failing load is within ``1 + tolerance`` of the meeting one. It then places probes
on either side of the capacity that :mod:`bench.capacity.fit` draws from all probes so far,
until that capacity's interval is within ``1 + precision`` (its high / low) or
``max_probes`` have been sent. The capacity it states is the fit's: an estimate and an
interval, an end None where the data leave it unbounded.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from bench.capacity.fit import LEVEL, WINDOW, Fit, fit_capacity
from bench.stats import wilson_interval

#: Why a search stopped.
CONVERGED, MAX_PROBES = "converged", "max-probes"
ABOVE_MAX, BELOW_MIN = "meets at the highest load", "fails at the lowest load"


@dataclass(frozen=True)
class SearchSettings:
    """How the search moves: the target attainment, first load, bracket growth and width,
    the capacity interval's width to stop at, requests per probe and the probe budget."""

    target: float = 0.95
    start: float = 1.0
    factor: float = 2.0
    tolerance: float = 0.10  # the looks bracket is narrow when high / low <= 1 + this
    precision: float = 0.25  # the capacity is told when its interval's high / low <= 1 + this
    requests: int = 100
    max_probes: int = 24
    min_rate: float = 0.01
    max_rate: float = 10_000.0
    level: float = LEVEL
    window: float | None = WINDOW


@dataclass
class Load:
    """One load's probes pooled."""

    rate: float
    sent: int = 0
    good: int = 0

    def looks_met(self, target: float) -> bool:
        return self.sent > 0 and self.good >= target * self.sent


@dataclass
class Capacity:
    """The search's answer: every probe in order, each load pooled, the fit, and why it
    stopped."""

    settings: SearchSettings
    probes: list[tuple[float, int, int]] = field(default_factory=list)  # rate, sent, good
    loads: dict[float, Load] = field(default_factory=dict)
    stopped: str = ""

    @property
    def fit(self) -> Fit:
        s = self.settings
        return fit_capacity(self.probes, s.target, s.level, s.window)

    def to_dict(self) -> dict:
        """The capacity (``estimate``, ``low``, ``high``), the fit, every load with its
        attainment and a 95% interval widened by the fit's overdispersion, every probe."""
        s, fit = self.settings, self.fit
        phi = fit.dispersion or 1.0

        def interval(load: Load) -> tuple[float, float]:
            n = load.sent / phi
            return wilson_interval(load.good / phi, n) if n > 0 else (0.0, 1.0)

        return {"settings": asdict(s), "estimate": fit.estimate, "low": fit.low,
                "high": fit.high, "fit": fit.to_dict(), "stopped": self.stopped,
                "loads": [{**asdict(load), "attainment": load.good / load.sent if load.sent
                           else None, "interval": interval(load)}
                          for load in sorted(self.loads.values(), key=lambda x: x.rate)],
                "probes": [{"rate": r, "sent": n, "good": g} for r, n, g in self.probes]}

    @property
    def told(self) -> bool:
        """The capacity has both ends."""
        fit = self.fit
        return fit.low is not None and fit.high is not None


def _bracket(cap: Capacity) -> float | str | None:
    """The next load to narrow the looks bracket, why the search stops at a range end, or
    None once the bracket is narrow."""
    s = cap.settings
    met = [r for r, load in cap.loads.items() if load.looks_met(s.target)]
    lo = max(met) if met else None
    above = [r for r, load in cap.loads.items() if not load.looks_met(s.target)
             and r > (lo or 0.0)]
    hi = min(above) if above else None
    if lo is None:
        rate = min(cap.loads) / s.factor
        return rate if rate >= s.min_rate else BELOW_MIN
    if hi is None:
        rate = max(cap.loads) * s.factor
        return rate if rate <= s.max_rate else ABOVE_MAX
    return math.sqrt(lo * hi) if hi / lo > 1 + s.tolerance else None


def _refine(cap: Capacity) -> float | str:
    """The next load to narrow the fitted capacity's interval, or CONVERGED: one step of
    ``1 + tolerance`` below or above the estimate, in turn (the bracket's middle while the
    fit has none, and the separating bracket's middle where the probes separate)."""
    s, fit = cap.settings, cap.fit
    if fit.low is not None and fit.high is not None and fit.high / fit.low <= 1 + s.precision:
        return CONVERGED
    if fit.dispersion is None and fit.estimate is not None:  # the probes separate
        for end, rate in ((fit.low, max(r for r in cap.loads if r < fit.estimate)),
                          (fit.high, min(r for r in cap.loads if r > fit.estimate))):
            if end is None:
                near = max(rate, fit.estimate) / min(rate, fit.estimate) < 1 + s.tolerance
                return rate if near else fit.estimate
    centre = fit.estimate
    if centre is None or not min(cap.loads) / s.factor <= centre <= max(cap.loads) * s.factor:
        met = [r for r, load in cap.loads.items() if load.looks_met(s.target)]
        above = [r for r in cap.loads if r > max(met, default=0.0)]
        centre = math.sqrt(max(met, default=min(cap.loads)) * min(above, default=max(cap.loads)))
    step = 1 + s.tolerance
    return centre * step if len(cap.probes) % 2 else centre / step


def step(cap: Capacity, measure: Callable[[float, int], tuple[int, int]]) -> bool:
    """Probe ``cap``'s next load with ``measure(rate, requests) -> (sent, good)``; False
    (and why, in ``cap.stopped``) when the search has ended."""
    s = cap.settings
    rate = (_bracket(cap) or _refine(cap)) if cap.probes else float(s.start)
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
