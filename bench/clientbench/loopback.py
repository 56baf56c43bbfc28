"""The loopback ceiling: what the least a streaming client can do gets from a server.

``python -m bench.clientbench.loopback --url URL --bodies FILE --concurrency C --requests N
--out FILE`` sends the JSON bodies of FILE (one per line, cycled) as HTTP/1.1 POSTs over
``C`` keep-alive connections (raw asyncio streams; uvloop when installed), each a closed
loop, and reads each reply only as far as chunked framing and SSE event boundaries (a blank
line): no JSON is parsed. TTFT is the first event, ITL the gaps between later events, as a
client can time them at best. It writes the :class:`bench.peers.base.ToolMetrics` fields.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bench import aio


class Stream:
    """One keep-alive connection that sends requests and times their event streams."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def exchange(self, request: bytes) -> tuple[float, list[float]] | None:
        """Send ``request``; the TTFT and the event gaps (s), or None if it failed."""
        start = time.perf_counter()
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        stamps: list[float] = []
        if not head.startswith(b"HTTP/1.1 200"):
            await self._body(head, [])  # read past it: the connection stays usable
            return None
        await self._body(head, stamps)
        if not stamps:
            return None
        return stamps[0] - start, list(np.diff(stamps))

    async def _body(self, head: bytes, stamps: list[float]) -> None:
        """Read the body after ``head``; stamp each event boundary (a blank line) on arrival."""
        fields = head.lower().split(b"\r\n")
        if b"transfer-encoding: chunked" not in fields:
            length = next((int(f.split(b":")[1]) for f in fields
                           if f.startswith(b"content-length:")), 0)
            await self.reader.readexactly(length)
            return
        while True:  # chunked transfer encoding: size line, data, CRLF; 0 ends it
            size = int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return
            data = await self.reader.readexactly(size + 2)
            now = time.perf_counter()
            stamps.extend([now] * data.count(b"\n\n"))


def _requests(url: str, bodies: list[bytes]) -> Iterator[bytes]:
    """Every body as a complete HTTP/1.1 request, encoded once, cycled."""
    parts = urllib.parse.urlsplit(url)
    encoded = [(f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(b)}\r\n\r\n").encode() + b
               for b in bodies]
    return itertools.cycle(encoded)


async def run(url: str, bodies: list[bytes], concurrency: int, requests: int) -> dict:
    """The closed-loop run's metrics (the ToolMetrics fields)."""
    parts = urllib.parse.urlsplit(url)
    source = itertools.islice(_requests(url, bodies), requests)
    ttfts: list[float] = []
    gaps: list[float] = []
    failed = 0

    async def worker() -> None:
        nonlocal failed
        stream = Stream(*await asyncio.open_connection(parts.hostname, parts.port))
        try:
            for request in source:  # shared: each request is taken once
                outcome = await stream.exchange(request)
                if outcome is None:
                    failed += 1
                    continue
                ttfts.append(outcome[0])
                gaps.extend(outcome[1])
        finally:
            stream.writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    duration = time.perf_counter() - start

    def pct(values: list[float], q: float) -> float | None:
        return float(np.percentile(values, q) * 1e3) if values else None

    return {"completed": len(ttfts), "failed": failed, "duration_s": duration,
            "request_throughput": len(ttfts) / duration,
            "ttft_p50_ms": pct(ttfts, 50), "ttft_p99_ms": pct(ttfts, 99),
            "itl_p50_ms": pct(gaps, 50), "itl_p99_ms": pct(gaps, 99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the endpoint, e.g. http://h:p/v1/chat/completions")
    parser.add_argument("--bodies", type=Path, required=True, help="JSON request bodies, one per line")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    bodies = [line.encode() for line in args.bodies.read_text().splitlines() if line.strip()]
    result = aio.run(run(args.url, bodies, args.concurrency, args.requests))
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
