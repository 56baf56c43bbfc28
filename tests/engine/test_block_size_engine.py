"""The block-size measurement against real vLLM: it finds the block size that the server's
own ``/server_info`` reports, from cached token counts alone."""

from __future__ import annotations

from bench.engine.block_size import measure_block_size
from bench.engine.target import Target


def test_measured_block_size_is_the_servers(target: Target) -> None:
    reported = target.metadata["cache_config"]["block_size"]
    assert reported is not None, "the session server must report its block size to compare"
    measured = measure_block_size(target.base_url, target.model, target.headers,
                                  zero_cached_omitted=target.zero_cached_omitted)
    assert measured == reported == target.block_size
