"""cache_salt on the real engine, chat path, one request at a time (issue 3's contract)."""

from __future__ import annotations

import asyncio
import secrets

import aiohttp
import pytest

from bench.client.connections import streaming
from bench.engine.target import Target
from bench.paths.base import PathContext
from bench.paths.chat import ChatPath
from bench.paths.media_urls import MediaUrls
from bench.run.exchange import exchange
from bench.verdicts.requests import full_hit_tokens
from bench.workload import Workload


async def _send_sequence(target: Target, workload: Workload, media_id: str,
                         salts: list[str | None]) -> list[dict]:
    ctx = PathContext(target.base_url, target.model, workload.media, MediaUrls("data"))
    modality = workload.media[media_id].modality
    nonce = secrets.token_hex(4)  # its own first block: independent of earlier tests
    messages = [{"role": "user", "content": [
        {"type": "text", "text": f"[{nonce}] what is in this {modality}?"},
        {"type": modality, "media": media_id}]}]
    out = []
    async with aiohttp.ClientSession() as session, streaming():
        for salt in salts:
            result = await exchange(session, ChatPath(ctx), messages, 2, salt, 300)
            assert result["ok"], result["error"]
            out.append(result)
    return out


@pytest.mark.parametrize("modality", ["image", "audio", "video"])
def test_repeat_hits_and_new_salt_misses(target: Target, modality_workloads: dict,
                                         modality: str) -> None:
    workload = modality_workloads[modality]
    media_id = next(m.id for m in workload.media.values() if m.modality == modality)
    a, b = secrets.token_hex(8), secrets.token_hex(8)
    got = asyncio.run(_send_sequence(target, workload, media_id, [None, None, a, a, b]))
    n = got[0]["prompt_tokens"]
    assert n > target.block_size, "prompt must span more than one block to test anything"
    assert {g["prompt_tokens"] for g in got} == {n}
    full = full_hit_tokens(n, target.block_size)
    assert [g["cached_tokens"] for g in got] == [0, full, 0, full, 0]
