"""Metadata that every result carries: machine, suite and time (pyperf-style)."""

from __future__ import annotations

import datetime as dt
import os
import platform
import socket

import psutil

from bench import SCHEMA_VERSION, __version__


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """Describe the machine that ran the client (asv keys results by this)."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "arch": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
    }


def base_metadata() -> dict:
    """Suite version, schema version, UTC timestamp and machine."""
    return {
        "schema_version": SCHEMA_VERSION,
        "saltbench_version": __version__,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
    }
