"""Throughput of the client's SSE parsing and timing, against the in-process fake server."""

import asyncio

from bench.client.connections import streaming
from bench.client.stream import post_stream
from bench.paths.base import is_token_event

EVENTS = 5_000


def test_post_stream_events_per_second(benchmark, fake_server):
    body = {"script": [{"events": EVENTS}, "data: [DONE]\n\n"]}

    async def one_stream():
        async with streaming():
            return await post_stream(
                fake_server.url + "/script", body, is_token_event=is_token_event, timeout_s=60
            )

    result = benchmark.pedantic(lambda: asyncio.run(one_stream()), rounds=5, warmup_rounds=1)
    assert result.ok and result.n_events == EVENTS
    if benchmark.stats is not None:  # None with --benchmark-disable
        benchmark.extra_info["events_per_s"] = EVENTS / benchmark.stats.stats.median
