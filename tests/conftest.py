"""Shared fixtures: one real vLLM server for the session, and a fake server for the client.

Test files named ``*_engine.py`` need the real engine (marker ``engine``). Tests run in
three groups, so that at most one vLLM server runs at a time: those without the engine,
then engine tests that start servers of their own, then those on the session server
(the ``target`` fixture), which stops at the end. ``SALTBENCH_SERVER_URL`` points the
tests at a server that is already running instead.

When engine tests are selected, the engines they need (the default one and its tiny model,
and any ``@pytest.mark.engines(SPEC)`` names) are provisioned in the background while the
tests without the engine run; an engine test that gets there first waits on the cache's lock
(a failed background step is redone, with its error, by the test that needs it).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeserver import FakeServer

from bench.cachedirs import cache_dir
from bench.engine.open import open_target
from bench.engine.target import Target
from bench.options import target_args
from bench.workload import Workload, generate, load_workload


@pytest.fixture(scope="session")
def target() -> Iterator[Target]:
    args = target_args(server_url=os.environ.get("SALTBENCH_SERVER_URL"), model_preset="tiny",
                       start_timeout=900.0)
    with open_target(args) as t:
        yield t


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture(scope="session")
def modality_workloads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Workload]:
    """Small single-modality workloads from the shipped image, audio and video specs."""
    root: Path = tmp_path_factory.mktemp("workloads")
    return {m: load_workload(generate(m, requests=6, out=root / m))
            for m in ("image", "audio", "video")}


def _group(item: pytest.Item) -> int:
    if not Path(item.fspath).stem.endswith("_engine"):
        return 0
    return 2 if "target" in getattr(item, "fixturenames", ()) else 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _group(item):
            item.add_marker(pytest.mark.engine)
    items.sort(key=_group)


ROOT = Path(__file__).resolve().parent.parent
_provisioning: list[subprocess.Popen] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start provisioning what the selected engine tests need, in one background process
    group (its log under the cache's ``logs``)."""
    engine_items = [i for i in session.items if _group(i)]
    if not engine_items or session.config.option.collectonly:
        return
    extra = dict.fromkeys(spec for item in engine_items
                          for mark in item.iter_markers("engines") for spec in mark.args)
    cli = [sys.executable, str(ROOT / "run_bench.py")]
    steps = [[*cli, "engine", "provision"], [*cli, "model", "tiny"],
             *([*cli, "engine", "provision", "--engine", spec] for spec in extra)]
    log = cache_dir("logs") / "tests-provision.log"
    with open(log, "w") as out:
        _provisioning.append(subprocess.Popen(
            ["bash", "-c", "; ".join(shlex.join(step) for step in steps)], stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=ROOT))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"provisioning the engines in the background (log: {log})")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop background provisioning that is still running (an interrupted step is rebuilt
    on next use)."""
    for proc in _provisioning:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
