"""A simulated server whose SLO misses come in runs: a first-come-first-served queue with
``slots`` servers, lognormal service times and gamma inter-arrivals (Poisson at
``burstiness`` 1), every probe starting from an empty queue. A request is good when its
time in the system is within ``slo`` seconds. Its true capacity for a target is the rate at
which the expected attainment of a probe of ``n`` requests equals the target."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Queue:
    slots: int = 2
    service: float = 0.2  # mean service time, s
    cv: float = 0.5  # its coefficient of variation
    slo: float = 0.5  # s
    burstiness: float = 1.0

    def good(self, rate: float, n: int, probes: int, rng: np.random.Generator) -> np.ndarray:
        """Good requests in each of ``probes`` probes of ``n`` requests at ``rate``."""
        arrivals = np.cumsum(rng.gamma(self.burstiness, 1 / (rate * self.burstiness),
                                       size=(probes, n)), axis=1)
        sigma = math.sqrt(math.log(1 + self.cv ** 2))
        service = rng.lognormal(math.log(self.service) - sigma ** 2 / 2, sigma, (probes, n))
        free = np.zeros((probes, self.slots))
        rows = np.arange(probes)
        good = np.zeros(probes, dtype=int)
        for j in range(n):
            slot = np.argmin(free, axis=1)
            done = np.maximum(arrivals[:, j], free[rows, slot]) + service[:, j]
            free[rows, slot] = done
            good += done - arrivals[:, j] <= self.slo
        return good

    def capacity(self, target: float, n: int, probes: int = 20_000, seed: int = 0) -> float:
        """The rate whose expected attainment is ``target`` (bisection on common numbers)."""
        lo, hi = 0.01, 100.0
        for _ in range(30):
            mid = math.sqrt(lo * hi)
            rng = np.random.default_rng(seed)
            lo, hi = (mid, hi) if self.good(mid, n, probes, rng).mean() >= target * n else (lo, mid)
        return math.sqrt(lo * hi)

    def design_effect(self, rate: float, n: int, probes: int = 20_000, seed: int = 0) -> float:
        """The variance of a probe's good count over the binomial variance at its mean."""
        good = self.good(rate, n, probes, np.random.default_rng(seed))
        p = good.mean() / n
        return float(good.var() / (n * p * (1 - p)))
