"""Throughput of the client's SSE parsing and timing, against the in-process fake server."""

import asyncio
import sys
from pathlib import Path

import aiohttp
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))
from fakeserver import FakeServer  # noqa: E402

from bench.client.stream import post_stream  # noqa: E402

EVENTS = 5_000


def is_token_event(event: dict) -> int:
    return len(event["choices"])


@pytest.fixture(scope="module")
def server():
    with FakeServer() as fake:
        yield fake


def test_post_stream_events_per_second(benchmark, server):
    body = {"script": [{"events": EVENTS}, "data: [DONE]\n\n"]}

    async def one_stream():
        async with aiohttp.ClientSession() as session:
            return await post_stream(
                session, server.url + "/script", body, is_token_event=is_token_event, timeout_s=60
            )

    result = benchmark.pedantic(lambda: asyncio.run(one_stream()), rounds=5, warmup_rounds=1)
    assert result.ok and result.n_events == EVENTS
    benchmark.extra_info["events_per_s"] = EVENTS / benchmark.stats.stats.median
