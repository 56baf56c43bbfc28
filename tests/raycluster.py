"""A local Ray cluster of several nodes on this machine (Ray's own ``cluster_utils``): a
head and workers, each a raylet with its own CPU resources; shut down whatever happens."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

ray = pytest.importorskip("ray")  # the Ray tests skip only where Ray is not installed
from ray.cluster_utils import Cluster  # noqa: E402


@contextlib.contextmanager
def local_cluster(nodes: int = 2, cpus: int = 1) -> Iterator[tuple[Cluster, list]]:
    """``nodes`` nodes of ``cpus`` CPUs each: the cluster and its worker nodes."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus})
    try:
        workers = [cluster.add_node(num_cpus=cpus) for _ in range(nodes - 1)]
        cluster.wait_for_nodes()
        yield cluster, workers
    finally:
        cluster.shutdown()
