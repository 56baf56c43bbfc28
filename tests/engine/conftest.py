"""One real vLLM server for the whole test session (tiny model), stopped at the end.

``SALTBENCH_SERVER_URL`` points the tests at a server that is already running instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.target import Target, open_target, target_args
from bench.workload import Workload, generate, load_workload


@pytest.fixture(scope="session")
def target() -> Iterator[Target]:
    args = target_args(server_url=os.environ.get("SALTBENCH_SERVER_URL"), model_preset="tiny",
                       start_timeout=900.0)
    with open_target(args) as t:
        yield t


@pytest.fixture(scope="session")
def modality_workloads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Workload]:
    """Small single-modality workloads from the shipped image, audio and video specs."""
    root: Path = tmp_path_factory.mktemp("workloads")
    return {m: load_workload(generate(m, requests=6, out=root / m))
            for m in ("image", "audio", "video")}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.engine)
