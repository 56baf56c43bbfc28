"""Shared helpers for workload tests: tiny specs written to tmp_path, generated once per test."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bench.workload.build import generate


@pytest.fixture(scope="session")
def smoke_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped ``smoke`` dataset, generated once for the whole session."""
    return generate("smoke", out=tmp_path_factory.mktemp("smoke") / "wl")


@pytest.fixture
def make_spec(tmp_path: Path):
    """Write a TOML spec from a dedented string and return its path."""
    def write(text: str, name: str = "tiny") -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(textwrap.dedent(text))
        return path
    return write
