"""Command-line interface: one sub-command per module in :mod:`bench.commands`."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import signal
import sys

from bench import __version__
from bench.errors import BenchError

#: Sub-commands in help order; each names a module in bench.commands with
#: ``add_arguments(parser)`` and ``run(args) -> int``.
COMMANDS = {
    "demo": "Provision the CPU engine and run the end-to-end demo (default)",
    "engine": "Provision, check or serve an engine environment",
    "model": "Build a local random-weight multimodal model",
    "generate": "Generate a workload (manifest + media) from a spec file",
    "inspect": "Summarise a workload manifest",
    "run": "Run a workload through request paths and salt modes",
    "isolation": "Judge cache_salt isolation per path and modality (exit 1 on a leak)",
    "report": "Build charts, an HTML page and a Markdown summary from results",
    "compare": "Compare two runs with confidence intervals; gate CI (exit 1 on a regression)",
    "ab": "A/B two engines on this machine, interleaved, with restarts; gate CI on a 10%% "
          "regression",
    "matrix": "Run the same benchmark on several vLLM versions and compare them",
    "trends": "Many runs as series with change points and a dashboard; exit 1 when the "
              "newest run lies after a regression",
    "policies": "Compare vllm-router policies x salt modes on managed replicas",
    "mitigations": "Which server settings and client uuid modes close each tenant-boundary "
                   "channel, and at what TTFT cost",
    "capacity": "What salting costs in capacity: the highest load within an SLO per path "
                "and salt mode",
    "clientbench": "Measure saltbench's client against its peers on a zero-work server",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser; only ``command``'s module is imported (keeps start-up fast)."""
    parser = argparse.ArgumentParser(
        prog="saltbench", description="Multimodal cache-salt benchmarking for vLLM.")
    parser.add_argument("--version", action="version", version=f"saltbench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        if name != command:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        module = importlib.import_module(f"bench.commands.{name}")
        cmd = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(cmd)
        cmd.set_defaults(_module=module)
    return parser


#: The signal that stopped the command (its exit code is 128 + it, as a shell reports).
_stopped_by: list[int] = []


def _stop(signum: int, frame: object) -> None:
    """SIGINT and SIGTERM: unwind (outputs are written and servers stopped on the way);
    a second one while unwinding escalates (see ``ManagedServer.stop``).

    Inside a running event loop the interrupt is raised by the loop itself, from a callback
    of its own: raised in a protocol callback it would be lost (uvloop closes the
    connection and goes on; httptools turns it into a parser error)."""
    _stopped_by.append(signum)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise KeyboardInterrupt from None
    loop.call_soon_threadsafe(_interrupt)


def _interrupt() -> None:
    raise KeyboardInterrupt


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM stop the command cleanly, installed explicitly: a process started
    from a non-interactive shell's background job inherits SIGINT=ignored, and a managed
    server must be stopped on SIGTERM too."""
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    argv = argv or ["demo"]
    parser = build_parser(next((a for a in argv if a in COMMANDS), None))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return 2
    install_signal_handlers()
    try:
        return int(args._module.run(args) or 0)
    except BenchError as exc:
        print(f"saltbench {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        signum = _stopped_by[0] if _stopped_by else signal.SIGINT
        print(f"saltbench {args.command}: interrupted ({signal.Signals(signum).name})",
              file=sys.stderr)
        return 128 + signum
