"""pytest plugin: run a saltbench scenario under pytest-benchmark, and gate its metrics.

Installed with saltbench (entry point ``pytest11``: ``saltbench``; ``-p no:saltbench`` turns
it off). It costs nothing when its fixtures are not used: no server starts and no saltbench
module beyond this one is imported until a fixture or an option needs it.

A test asks for ``saltbench`` and calls it once::

    from bench.verdicts.runs import problems

    def test_smoke_scenario(saltbench):
        rounds = saltbench(spec="smoke", requests=6, rounds=3, paths=["chat", "generate-parts"])
        assert all(not problems(results) for results in rounds)

``saltbench(spec="smoke", requests=None, rounds=3, *, seed=None, warmup_rounds=0,
**run_options)`` runs the workload (every chosen path x salt mode; ``run_options`` are
the fields of :class:`bench.run.passes.RunOptions`, e.g. ``paths``, ``salt_modes``,
``warmup``, ``max_concurrency``) ``rounds`` times through ``benchmark.pedantic``, each
round into its own directory under the test's ``tmp_path``, and returns the list of
per-round results dicts (``results.json``; one untimed round under ``--benchmark-disable``).
pytest-benchmark's timing statistics are the wall time of one round (lower is better).
``benchmark.extra_info`` gets the scenario's saltbench metrics, pooled over the rounds'
measured requests (throughputs over the summed measured time): every headline metric of
:mod:`bench.registry` (``hit_rate`` as a fraction, ``mean_ttft_ms``, ``p99_ttft_ms``,
``request_throughput``, ``output_throughput``, ``leaked_tokens`` (judged over the prime and
measure phases), ...), ``completed``, ``failed``, ``missing_tokens``, the same per
``path/salt_mode`` under ``saltbench_groups`` (informational, not gated), and
``saltbench_directions`` (metric -> ``lower`` | ``higher`` | ``zero``).

The server: ``--saltbench-server-url URL`` (or ``SALTBENCH_SERVER_URL``) uses a running
one; otherwise the session fixture ``saltbench_target`` starts the tiny model on the
managed CPU/GPU engine once per session and stops it at the end.

::

    pytest tests/bench_scenarios.py --benchmark-autosave            # store a baseline
    pytest tests/bench_scenarios.py --benchmark-compare --benchmark-compare-fail=mean:10% \\
        --saltbench-gate [--saltbench-thresholds gate.toml]

``--benchmark-compare-fail`` gates the round time (lower is better). ``--saltbench-gate``
gates the saltbench metrics of every ``saltbench`` test against the same test in the run
``--benchmark-compare`` loaded, each in its own direction: a higher-is-better metric that
dropped, or a lower-is-better one that rose, beyond its threshold fails the session, and
so does ``leaked_tokens > 0`` (also without ``--benchmark-compare``). Thresholds are the
registry's defaults, or the ``[metrics]`` table of a ``saltbench compare`` thresholds file
(``--saltbench-thresholds``; its ``[[override]]`` tables and settings do not apply here).
A table in the terminal summary names test, metric, base, new, change and threshold.

This gate is threshold-only: pytest-benchmark stores one value per metric, so there is no
interval and no notion of noise; a change beyond the threshold fails even when it is
within the run-to-run spread. ``saltbench compare`` is the statistical gate (t
intervals over server starts). Not for pytest-xdist (pytest-benchmark turns
itself off under it too).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from bench.engine.target import Target

SERVER_ENV = "SALTBENCH_SERVER_URL"
DIRECTIONS_KEY = "saltbench_directions"
GROUPS_KEY = "saltbench_groups"

#: (test fullname, extra_info) of every saltbench benchmark this session ran.
_ENTRIES = pytest.StashKey[list[tuple[str, dict]]]()
_THRESHOLDS = pytest.StashKey[dict[str, "float | None"]]()
_OUTCOME = pytest.StashKey["GateOutcome"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("saltbench", "saltbench scenarios (bench.pytest_plugin)")
    group.addoption("--saltbench-server-url", default=None, metavar="URL",
                    help=f"use this running vLLM server (default: ${SERVER_ENV}, else start the "
                         "tiny model for the session)")
    group.addoption("--saltbench-gate", action="store_true", default=False,
                    help="fail the session when a saltbench metric regressed beyond its threshold "
                         "against --benchmark-compare's run, or when tokens leaked")
    group.addoption("--saltbench-thresholds", type=Path, default=None, metavar="TOML",
                    help="thresholds for --saltbench-gate (the [metrics] table of a "
                         "'saltbench compare' thresholds file)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ENTRIES] = []
    path = config.getoption("saltbench_thresholds", None)
    if not config.getoption("saltbench_gate", False):
        if path is not None:
            raise pytest.UsageError("--saltbench-thresholds needs --saltbench-gate")
        return
    from bench.compare.thresholds import load_thresholds
    from bench.errors import BenchError
    try:
        config.stash[_THRESHOLDS] = load_thresholds(path).metrics
    except BenchError as exc:
        raise pytest.UsageError(f"--saltbench-thresholds: {exc}") from None


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def saltbench_target(pytestconfig: pytest.Config) -> Iterator[Target]:
    """The server of the session: ``--saltbench-server-url`` or a managed tiny model."""
    from bench.engine.open import open_target
    from bench.options import target_args
    url = pytestconfig.getoption("saltbench_server_url") or os.environ.get(SERVER_ENV) or None
    args = target_args(server_url=url, model_preset="tiny", start_timeout=900.0)
    with open_target(args) as target:
        yield target


@pytest.fixture
def saltbench(benchmark: Any, saltbench_target: Target, tmp_path: Path,
              pytestconfig: pytest.Config) -> Callable[..., list[dict]]:
    """Run a saltbench scenario as this test's benchmark (see the module docstring)."""
    def run(spec: str = "smoke", requests: int | None = None, rounds: int = 3, *,
            seed: int | None = None, warmup_rounds: int = 0, **run_options: Any) -> list[dict]:
        results = run_scenario(benchmark, saltbench_target, tmp_path, spec, requests, rounds,
                               seed, warmup_rounds, run_options)
        pytestconfig.stash[_ENTRIES].append((benchmark.fullname, dict(benchmark.extra_info)))
        return results
    return run


def run_scenario(benchmark: Any, target: Target, out_root: Path, spec: str,
                 requests: int | None, rounds: int, seed: int | None, warmup_rounds: int,
                 run_options: dict[str, Any]) -> list[dict]:
    """``rounds`` timed runs of the workload; fills ``benchmark.extra_info``; the results."""
    from rich.console import Console

    from bench.measured.records import read_records
    from bench.outputs import new_run_id
    from bench.paths import PATHS
    from bench.run.session import run_benchmark
    from bench.run.settings import RunOptions
    from bench.workload import open_workload

    workload = open_workload(spec, seed, requests)  # generated (or reused) outside the timing
    run_options.setdefault("paths", list(PATHS))
    if "drop_salt_on" in run_options:
        run_options["drop_salt_on"] = tuple(run_options["drop_salt_on"])
    opts = RunOptions(**run_options)
    name = workload.metadata["spec"]["name"]
    console = Console(stderr=True)
    done: list[tuple[dict, list[dict]]] = []

    def one_round() -> dict:
        out = out_root / f"round-{len(done)}"
        results = run_benchmark(target, workload, opts, out, new_run_id(name), console)
        done.append((results, read_records(out / "records.jsonl")))
        return results

    benchmark.pedantic(one_round, rounds=rounds, iterations=1, warmup_rounds=warmup_rounds)
    timed = done[warmup_rounds:] or done  # benchmarks disabled: one untimed run
    benchmark.extra_info.update(scenario_info(timed))
    benchmark.extra_info.update(saltbench_spec=name, saltbench_rounds=len(timed),
                                saltbench_requests=workload.metadata["counts"]["requests"])
    return [results for results, _ in timed]


# --- metrics for extra_info -----------------------------------------------------------------


def scenario_info(rounds: list[tuple[dict, list[dict]]]) -> dict:
    """extra_info of (results, records) rounds: metrics pooled over all measured requests,
    the same per ``path/salt_mode``, and each metric's direction."""
    from bench.registry import METRICS
    passes = [p for results, _ in rounds for p in results["passes"]]
    records = [r for _, recs in rounds for r in recs]
    judged = [g for results, _ in rounds for g in results["judgements"]["groups"]]
    groups = sorted({(p["path"], p["salt_mode"]) for p in passes})
    return {
        **_pooled(records, passes, judged),
        GROUPS_KEY: {f"{path}/{mode}": _pooled(
            [r for r in records if (r["path"], r["salt_mode"]) == (path, mode)],
            [p for p in passes if (p["path"], p["salt_mode"]) == (path, mode)],
            [g for g in judged if (g["path"], g["salt_mode"]) == (path, mode)])
            for path, mode in groups},
        DIRECTIONS_KEY: {m.name: m.better for m in METRICS.values()},
    }


def _pooled(records: list[dict], passes: list[dict], judged: list[dict]) -> dict:
    """Headline metrics of measured ``records`` over the passes' summed measured time;
    leaked and missing tokens from the judgements (prime and measure phases)."""
    from bench.metrics import aggregate
    from bench.registry import METRICS
    from bench.vocab import MEASURE
    measured = [r for r in records if r["phase"] == MEASURE]
    metrics = aggregate(measured, sum(p.get("duration_s") or 0.0 for p in passes))
    return {**{name: metrics.get(name) for name in METRICS},
            "completed": metrics["completed"], "failed": metrics["failed"],
            "leaked_tokens": sum(g.get("leaked_tokens") or 0 for g in judged),
            "missing_tokens": sum(g.get("missing_tokens") or 0 for g in judged)}


# --- the gate -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateRow:
    """One metric of one test, judged against its threshold."""

    test: str
    metric: str
    base: float | None
    new: float | None
    change: str
    threshold: str
    failed: bool


@dataclass
class GateOutcome:
    """What the gate compared, and what failed."""

    rows: list[GateRow] = field(default_factory=list)
    tests: int = 0
    baselines: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[GateRow]:
        return [r for r in self.rows if r.failed]


def change_of(metric_name: str, base: float, new: float) -> float:
    """``new`` against ``base``: a fraction (relative metrics) or percentage points."""
    from bench.compare.intervals import change
    from bench.registry import METRICS
    if base == 0 and new == 0:
        return 0.0
    return float(change(METRICS[metric_name], base, new))


def compare_extra_info(test: str, new: dict, base: dict | None,
                       thresholds: dict[str, float | None]) -> list[GateRow]:
    """Gate rows of one test's saltbench metrics against its baseline (``None``: no baseline,
    only the must-be-zero metrics are judged). A threshold of ``None`` turns a metric off."""
    from bench.compare.thresholds import format_threshold
    from bench.registry import METRICS, POINTS, ZERO
    rows = []
    for name, metric in METRICS.items():
        limit = thresholds.get(name, metric.threshold)
        value = new.get(name)
        if limit is None or value is None:
            continue
        before = base.get(name) if base is not None else None
        if metric.better == ZERO:
            rows.append(GateRow(test, name, before, value, "", format_threshold(metric, limit),
                                value > 0))
            continue
        if before is None:
            continue
        change = change_of(name, before, value)
        text = f"{change:+.1f}pp" if metric.change == POINTS else f"{change:+.1%}"
        rows.append(GateRow(test, name, before, value, text, format_threshold(metric, limit),
                            metric.worse(change) > limit))
    return rows


def _compared_mapping(config: pytest.Config) -> dict[str, dict[str, dict]]:
    """pytest-benchmark's loaded ``--benchmark-compare`` runs: {file: {fullname: bench}}."""
    session = getattr(config, "_benchmarksession", None)
    return {str(k): v for k, v in (getattr(session, "compared_mapping", None) or {}).items()}


def evaluate_gate(entries: list[tuple[str, dict]], mapping: dict[str, dict[str, dict]],
                  thresholds: dict[str, float | None]) -> GateOutcome:
    """Every saltbench test against each compared run that has it (or, without one, alone)."""
    outcome = GateOutcome(tests=len(entries), baselines=[Path(p).name for p in mapping])
    for test, info in entries:
        bases = [benches[test].get("extra_info") or {} for benches in mapping.values()
                 if test in benches]
        if not bases:
            outcome.unmatched.append(test)
        for base in bases or [None]:
            outcome.rows.extend(compare_extra_info(test, info, base, thresholds))
    return outcome


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not config.getoption("saltbench_gate", False):
        return
    outcome = evaluate_gate(config.stash[_ENTRIES], _compared_mapping(config),
                            config.stash[_THRESHOLDS])
    config.stash[_OUTCOME] = outcome
    if outcome.failures and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def format_table(rows: list[GateRow]) -> list[str]:
    """The rows as aligned text lines, with a header."""
    cells = [("test", "metric", "base", "new", "change", "threshold")]
    cells += [(r.test, r.metric, _number(r.base), _number(r.new), r.change or "-", r.threshold)
              for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def summary_lines(outcome: GateOutcome) -> list[str]:
    """The gate's verdict for the terminal summary."""
    against = (f"against {', '.join(outcome.baselines)}" if outcome.baselines
               else "no --benchmark-compare run: leaks only")
    compared = sum(1 for r in outcome.rows if r.change)
    verdict = (f"FAILED: {len(outcome.failures)} metric(s) out of bounds, the session fails"
               if outcome.failures else "passed")
    lines = [f"saltbench gate ({against}; threshold-only, no interval): {outcome.tests} "
             f"test(s), {compared} comparison(s): {verdict}"]
    if outcome.baselines and outcome.unmatched:
        lines.append(f"no baseline for: {', '.join(outcome.unmatched)} (leaks only)")
    if outcome.failures:
        lines += format_table(outcome.failures)
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> Iterator[None]:
    """The gate's table after the other summaries (pytest-benchmark's table included), even
    when ``--benchmark-compare-fail`` raises."""
    try:
        return (yield)
    finally:
        _write_gate(terminalreporter, config.stash.get(_OUTCOME, None))


def _write_gate(terminalreporter: pytest.TerminalReporter, outcome: GateOutcome | None) -> None:
    if outcome is None:
        return
    failed = bool(outcome.failures)
    terminalreporter.write_sep("=", "saltbench gate", red=failed, green=not failed)
    for line in summary_lines(outcome):
        terminalreporter.write_line(line)
