"""Request paths: one logical request, four ways into vLLM."""

from __future__ import annotations

from bench.errors import BenchError
from bench.paths.base import PathContext
from bench.paths.chat import ChatPath
from bench.paths.generate import FeaturesPath, PartsPath, TokensPath

PATHS = {cls.name: cls for cls in (ChatPath, TokensPath, PartsPath, FeaturesPath)}


def make_paths(names: list[str], ctx: PathContext) -> list:
    """Path objects for ``names``; an unknown name is a BenchError listing the known ones."""
    unknown = [n for n in names if n not in PATHS]
    if unknown:
        raise BenchError(f"--paths: unknown {', '.join(unknown)}; known: {', '.join(PATHS)}")
    return [PATHS[n](ctx) for n in names]
