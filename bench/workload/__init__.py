"""Workloads: spec files -> deterministic requests, media and a cache-hit oracle on disk."""

from bench.workload.build import generate, open_workload
from bench.workload.manifest import MediaItem, Workload, load_workload

__all__ = ["MediaItem", "Workload", "generate", "load_workload", "open_workload"]
