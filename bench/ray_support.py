"""What saltbench's Ray features share (``matrix --ray``, ``run --ray``): the optional
``ray`` module, where a task or actor runs, and directories moved between nodes packed
(the workload goes to every node as the driver's files, the same bytes on every node)."""

from __future__ import annotations

import io
import re
import socket
import tarfile
from pathlib import Path

from bench.cachedirs import cache_dir, locked
from bench.docio import replace_dir
from bench.errors import BenchError
from bench.workload import Workload, open_workload


def ray_module():
    """The ``ray`` module, or a BenchError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise BenchError("--ray needs the ray package: pip install 'saltbench[ray]'") from None
    return ray


#: A cluster address given as HOST:PORT (``auto`` and ``ray://`` addresses are Ray's to find).
_HOST_PORT = re.compile(r"^(?P<host>[^:/]+):(?P<port>\d+)$")


def connect(address: str):
    """Connect to the Ray cluster at ``address``; the ``ray`` module. A BenchError names the
    address when nothing answers there (Ray itself would wait minutes for a GCS at a
    HOST:PORT where none listens)."""
    ray = ray_module()
    match = _HOST_PORT.match(address)
    if match:
        try:
            socket.create_connection((match["host"], int(match["port"])), timeout=5).close()
        except OSError as exc:
            raise BenchError(f"--ray {address}: no Ray cluster answers there ({exc}); start "
                             "one with `ray start --head` (see docs/cluster.md)") from None
    try:
        ray.init(address=address, log_to_driver=True)
    except ConnectionError as exc:
        raise BenchError(f"--ray {address}: {exc}") from None
    return ray


def node() -> dict[str, str]:
    """The Ray node this code runs on: its id and IP address (in a task or an actor)."""
    ray = ray_module()
    return {"node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": ray.util.get_node_ip_address()}


def pack(directory: Path) -> bytes:
    """``directory`` as a gzipped tar (relative names)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(directory, arcname=".")
    return buffer.getvalue()


def unpack(data: bytes, directory: Path) -> None:
    """Unpack :func:`pack`'s ``data`` into ``directory`` (no path may leave it)."""
    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(directory, filter="data")


def ship(workload: Workload) -> dict:
    """The workload as it travels to the nodes (put it in the object store once)."""
    return {"name": workload.dir.name, "data": pack(workload.dir)}


def land(shipped: dict) -> Workload:
    """On a node: the shipped workload, unpacked into the node's workload cache unless
    there already (same name: same spec, seed and size), and checked as ``--spec DIR`` is."""
    target = cache_dir("workloads") / shipped["name"]
    with locked(target):
        if not target.exists():
            staging = target.with_name(f".{target.name}.landing")
            unpack(shipped["data"], staging)
            replace_dir(staging, target)
    return open_workload(str(target))
