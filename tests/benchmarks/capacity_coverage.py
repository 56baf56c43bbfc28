"""How often the capacity search's stated interval covers the true capacity, and the cost of
salting's interval the true cost (a salted queue with longer service), on simulated queues
whose misses come in runs (tests/capacity/simulated_queue.py). A benchmark: its tables go to
docs/capacity.md.

    python tests/benchmarks/capacity_coverage.py --searches 400 --seed 1
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from itertools import product
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "capacity"))

from simulated_queue import Queue  # noqa: E402

from bench.capacity.fit import fit_cost  # noqa: E402
from bench.capacity.search import SearchSettings, search, search_interleaved  # noqa: E402

#: (name, queue, target attainment)
SETTINGS = [
    ("2 slots, Poisson, 95%", Queue(), 0.95),
    ("4 slots, Poisson, 95%", Queue(slots=4, service=0.4, slo=1.0), 0.95),
    ("2 slots, service cv 0.3, 99%", Queue(cv=0.3), 0.99),
    ("1 slot, bursty arrivals, 90%", Queue(slots=1, service=0.1, slo=0.3, burstiness=0.5), 0.9),
]


def coverage(queue: Queue, settings: SearchSettings, searches: int, seed: int) -> dict:
    """Searches on ``queue``: the share whose interval covers the true capacity, the share
    with both ends, the median width (high / low) where both, the mean probes."""
    true = queue.capacity(settings.target, settings.requests)
    covered = told = 0
    widths, probes = [], []
    for i in range(searches):
        rng = np.random.default_rng([seed, i])
        cap = search(lambda rate, n, rng=rng: (n, int(queue.good(rate, n, 1, rng)[0])), settings)
        fit = cap.fit
        covered += (fit.low or 0.0) <= true <= (fit.high or math.inf)
        if fit.low is not None and fit.high is not None:
            told += 1
            widths.append(fit.high / fit.low)
        probes.append(len(cap.probes))
    return {"capacity": true, "covered": covered / searches, "told": told / searches,
            "width": float(np.median(widths)) if widths else None,
            "probes": float(np.mean(probes)),
            "design_effect": queue.design_effect(true, settings.requests)}


def cost_coverage(none: Queue, salted: Queue, settings: SearchSettings, searches: int,
                  seed: int) -> dict:
    """Pairs of searches interleaved as the capacity command runs them: the share whose
    cost interval covers the true cost, the share with both ends, the median width."""
    true = 1 - (salted.capacity(settings.target, settings.requests)
                / none.capacity(settings.target, settings.requests))
    covered = told = 0
    widths = []
    for i in range(searches):
        rng = np.random.default_rng([seed, i])
        caps = search_interleaved(
            {mode: lambda rate, n, q=q, rng=rng: (n, int(q.good(rate, n, 1, rng)[0]))
             for mode, q in (("none", none), ("salted", salted))}, settings, seed=i)
        cost = fit_cost(caps["none"].probes, caps["salted"].probes, settings.target,
                        settings.level, settings.window)
        covered += (cost.low if cost.low is not None else -math.inf) <= true <= (
            cost.high if cost.high is not None else math.inf)
        if cost.low is not None and cost.high is not None:
            told += 1
            widths.append(cost.high - cost.low)
    return {"cost": true, "covered": covered / searches, "told": told / searches,
            "width": float(np.median(widths)) if widths else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--levels", type=float, nargs="+", default=[0.95, 0.99])
    parser.add_argument("--max-probes", type=int, nargs="+", default=[24])
    parser.add_argument("--parts", nargs="+", choices=("capacity", "cost"),
                        default=["capacity", "cost"], help="which tables to make")
    parser.add_argument("--slower", type=float, nargs="+", default=[0.0, 0.1],
                        help="the salted queue's extra service time, a fraction")
    parser.add_argument("--windows", type=float, nargs="+", default=[1.5],
                        help="the second fit's window (0: fit all probes only)")
    args = parser.parse_args()
    if "capacity" in args.parts:
        capacity_table(args)
    if "cost" in args.parts:
        cost_table(args)


def capacity_table(args: argparse.Namespace) -> None:
    print("| queue | target | true capacity req/s | design effect at it | level | window "
          "| max probes | covered | both ends told | median high/low | probes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, queue, target in SETTINGS:
        for level, window, max_probes in product(args.levels, args.windows, args.max_probes):
            s = replace(SearchSettings(target=target), level=level, max_probes=max_probes,
                        window=window or None)
            r = coverage(queue, s, args.searches, args.seed)
            width = f"{r['width']:.2f}" if r["width"] else "-"
            print(f"| {name} | {target:.0%} | {r['capacity']:.2f} | {r['design_effect']:.1f} "
                  f"| {level:.0%} | {window or 'all'} | {max_probes} | {r['covered']:.1%} "
                  f"| {r['told']:.0%} | {width} | {r['probes']:.1f} |", flush=True)


def cost_table(args: argparse.Namespace) -> None:
    print("\n| queue | salted: service time | true cost | level | max probes | covered "
          "| both ends told | median width (points) |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, queue, target), slower in product(SETTINGS, args.slower):
        salted = replace(queue, service=queue.service * (1 + slower))
        for level, max_probes in product(args.levels, args.max_probes):
            s = replace(SearchSettings(target=target), level=level, max_probes=max_probes)
            r = cost_coverage(queue, salted, s, args.searches, args.seed)
            width = f"{100 * r['width']:.0f}" if r["width"] else "-"
            print(f"| {name} | +{slower:.0%} | {r['cost']:.1%} | {level:.0%} | {max_probes} "
                  f"| {r['covered']:.1%} | {r['told']:.0%} | {width} |", flush=True)


if __name__ == "__main__":
    main()
