"""Request paths: one logical request, four ways into vLLM."""

from __future__ import annotations

from bench.errors import BenchError
from bench.paths.base import PathContext
from bench.paths.chat import ChatPath
from bench.paths.generate import FeaturesPath, PartsPath, TokensPath

PATHS = {cls.name: cls for cls in (ChatPath, TokensPath, PartsPath, FeaturesPath)}


class SaltDropping:
    """TEST-ONLY: a path whose requests lose their salt, as a buggy client or server would.

    It proves that saltbench catches a leak; it never changes what vLLM does.
    """

    def __init__(self, path) -> None:
        self.path, self.name, self.text_only = path, path.name, path.text_only

    async def build(self, session, messages: list[dict], max_tokens: int, salt: str | None):
        return await self.path.build(session, messages, max_tokens, None)


def make_paths(names: list[str], ctx: PathContext, drop_salt_on: tuple[str, ...] = ()) -> list:
    """Path objects for ``names``; an unknown name is a BenchError listing the known ones."""
    unknown = [n for n in [*names, *drop_salt_on] if n not in PATHS]
    if unknown:
        raise BenchError(f"--paths: unknown {', '.join(unknown)}; known: {', '.join(PATHS)}")
    paths = [PATHS[n](ctx) for n in names]
    return [SaltDropping(p) if p.name in drop_salt_on else p for p in paths]
