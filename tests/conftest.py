"""Shared fixtures: one real vLLM server for the session, and a fake server for the client.

Test files named ``*_engine.py`` need the real engine (marker ``engine``). Tests run in
three groups, so that at most one vLLM server runs at a time: those without the engine,
then engine tests that start servers of their own, then those on the session server
(the ``target`` fixture), which stops at the end. ``SALTBENCH_SERVER_URL`` points the
tests at a server that is already running instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeserver import FakeServer

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
