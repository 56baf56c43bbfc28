"""Per-replica truth behind a router: counters from every replica, and which replica
served each request.

Counters are scraped (settled) from every replica, never from the router, and kept per
replica beside their sum. A request is attributed to a replica from a response header
that names it: ``x-saltbench-replica: HOST:PORT`` (the managed replicas' middleware) or
``x-vllm-router-worker: URL`` (routers that say where they sent it). Where no response
says, and requests are sent one at a time, the replica whose
``vllm:request_success_total`` rose by one is the one; otherwise it stays unknown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from urllib.parse import urlsplit

import aiohttp

from bench.client.connections import seen_headers
from bench.engine.target import Target
from bench.errors import BenchError
from bench.measured import counters
from bench.measured.records import Exchange

#: Response headers that name the replica: its address, or its URL.
ADDRESS_HEADER = "x-saltbench-replica"
URL_HEADER = "x-vllm-router-worker"
SUCCESS = "vllm:request_success_total"
#: How the replicas were told apart (``Attribution.method``).
BY_HEADER, BY_COUNTERS, UNKNOWN = "response-header", "counters-serial", "unknown"

async def scrape_servers(session: aiohttp.ClientSession,
                         target: Target) -> dict[str, dict[str, float]]:
    """Settled counters of every server of ``target``, by replica name (``""``: one server)."""
    names, urls = zip(*target.servers.items())
    scraped = await asyncio.gather(*(counters.settled_scrape(session, u) for u in urls))
    return dict(zip(names, scraped))


def servers_delta(before: dict[str, dict[str, float]],
                  after: dict[str, dict[str, float]]) -> tuple[dict[str, float], dict]:
    """The summed delta and each server's (``counters.delta`` each: a restarted replica
    raises :class:`~bench.measured.counters.CountersReset`)."""
    each = {name: counters.delta(before[name], after[name]) for name in after}
    total: dict[str, float] = {}
    for delta in each.values():
        for key, value in delta.items():
            total[key] = total.get(key, 0.0) + value
    return total, each


class PerReplica:
    """A run's view of the servers behind its target: counters from each, and the replica
    that served each request (behind a router; a single server is passed through)."""

    def __init__(self, target: Target, session: aiohttp.ClientSession,
                 serial: bool) -> None:
        self.target, self.session, self.serial = target, session, serial
        self.by_address = {urlsplit(r.url).netloc: r.name for r in target.replicas}
        self.by_url = {r.url.rstrip("/"): r.name for r in target.replicas}
        #: None until the first request shows whether responses name their replica.
        self.method: str | None = None

    def _from_headers(self, responses: list) -> str | None:
        """The replica the last response names (the stream is the request's last POST)."""
        for headers in reversed(responses):
            if (address := headers.get(ADDRESS_HEADER)) in self.by_address:
                return self.by_address[address]
            if (url := (headers.get(URL_HEADER) or "").rstrip("/")) in self.by_url:
                return self.by_url[url]
        return None

    async def scrape(self) -> dict[str, dict[str, float]]:
        """Settled counters of every server (:func:`scrape_servers`)."""
        return await scrape_servers(self.session, self.target)

    def delta(self, before: dict, after: dict) -> tuple[dict[str, float], dict]:
        """The summed counter delta, and behind a router the replicas' part of a pass:
        ``{"attribution": method, "counters": {replica: delta}}`` (else empty)."""
        total, each = servers_delta(before, after)
        if not self.target.replicas:
            return total, {}
        return total, {"attribution": self.method or UNKNOWN, "counters": each}

    async def _successes(self) -> dict[str, float] | None:
        try:
            scraped = await self.scrape()
        except BenchError:
            return None
        return {name: c.get(SUCCESS, 0.0) for name, c in scraped.items()}

    async def served(self, sending: Awaitable[Exchange], record: dict) -> Exchange:
        """Await ``sending``; behind a router, set ``record["replica"]`` (None: unknown)."""
        if not self.target.replicas:
            return await sending
        by_counters = self.serial and self.method in (None, BY_COUNTERS)
        before = await self._successes() if by_counters else None
        responses: list = []
        token = seen_headers.set(responses)
        try:
            out = await sending
        finally:
            seen_headers.reset(token)
        replica = self._from_headers(responses)
        if self.method is None and responses:
            self.method = BY_HEADER if replica else BY_COUNTERS if self.serial else UNKNOWN
        if replica is None and before is not None and (after := await self._successes()):
            rose = [name for name in after if after[name] - before.get(name, 0.0) == 1]
            replica = rose[0] if len(rose) == 1 else None
        record["replica"] = replica
        return out
