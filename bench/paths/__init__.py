"""Request paths: one logical request, four ways into vLLM."""

from __future__ import annotations

import aiohttp

from bench.errors import BenchError
from bench.paths.base import PathContext, RequestPath
from bench.paths.chat import ChatPath
from bench.paths.generate import FeaturesPath, PartsPath, TokensPath

PATHS: dict[str, type[RequestPath]] = {
    cls.name: cls for cls in (ChatPath, TokensPath, PartsPath, FeaturesPath)}


def media_paths() -> tuple[str, ...]:
    """Names of the paths that carry a request's media."""
    return tuple(n for n, cls in PATHS.items() if not cls.text_only)


def uuid_paths() -> tuple[str, ...]:
    """Names of the paths that forward a client ``uuid`` per media item."""
    return tuple(n for n, cls in PATHS.items() if cls.accepts_uuid)


class SaltDropping:
    """TEST-ONLY: a path whose requests lose their salt, as a buggy client or server would.

    It proves that saltbench catches a leak; it never changes what vLLM does.
    """

    def __init__(self, path: RequestPath) -> None:
        self.path, self.name, self.ctx = path, path.name, path.ctx
        self.text_only, self.accepts_uuid = path.text_only, path.accepts_uuid
        self.preprocesses_before_send = path.preprocesses_before_send

    async def build(self, session: aiohttp.ClientSession, messages: list[dict],
                    max_tokens: int, salt: str | None) -> tuple[str, dict]:
        return await self.path.build(session, messages, max_tokens, None)


def make_paths(names: list[str], ctx: PathContext,
               drop_salt_on: tuple[str, ...] = ()) -> list[RequestPath]:
    """Path objects for ``names``; an unknown name is a BenchError listing the known ones."""
    unknown = [n for n in [*names, *drop_salt_on] if n not in PATHS]
    if unknown:
        raise BenchError(f"--paths: unknown {', '.join(unknown)}; known: {', '.join(PATHS)}")
    paths = [PATHS[n](ctx) for n in names]
    return [SaltDropping(p) if p.name in drop_salt_on else p for p in paths]
