"""Request paths: one logical request, four ways into vLLM."""

from __future__ import annotations

import aiohttp

from bench.errors import BenchError
from bench.paths.base import PathContext, RequestPath
from bench.paths.chat import ChatPath
from bench.paths.generate import FeaturesPath, PartsPath, TokensPath
from bench.vocab import GENERATE_ROUTE

PATHS: dict[str, type[RequestPath]] = {
    cls.name: cls for cls in (ChatPath, TokensPath, PartsPath, FeaturesPath)}


def media_paths() -> tuple[str, ...]:
    """Names of the paths that carry a request's media."""
    return tuple(n for n, cls in PATHS.items() if not cls.text_only)


def uuid_paths() -> tuple[str, ...]:
    """Names of the paths that forward a client ``uuid`` per media item."""
    return tuple(n for n, cls in PATHS.items() if cls.accepts_uuid)


def unavailable_paths(names: list[str], target: dict) -> dict[str, str]:
    """The paths of ``names`` a server cannot serve, with the reason: a route it lacks, or a
    generate request field it does not know (and would silently ignore). ``target`` is the
    target's metadata (``routes_unavailable``, ``generate_fields``: bench.engine.routes)."""
    missing: dict[str, str] = target.get("routes_unavailable") or {}
    known = set(target.get("generate_fields") or [])
    out = {}
    for name in names:
        cls = PATHS[name]
        why = [f"{r}: {missing[r]}" for r in cls.routes if r in missing]
        if known and (lacking := [f for f in cls.generate_fields if f not in known]):
            why.append(f"{GENERATE_ROUTE} has no {', '.join(lacking)} field (this version "
                       "would ignore it)")
        if why:
            out[name] = "; ".join(why)
    return out


class SaltDropping:
    """TEST-ONLY: a path whose requests lose their salt, as a buggy client or server would.

    It proves that saltbench catches a leak; it never changes what vLLM does.
    """

    def __init__(self, path: RequestPath) -> None:
        self.path, self.name, self.ctx = path, path.name, path.ctx
        self.text_only, self.accepts_uuid = path.text_only, path.accepts_uuid
        self.preprocesses_before_send = path.preprocesses_before_send
        self.routes, self.generate_fields = path.routes, path.generate_fields

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
