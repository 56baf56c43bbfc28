"""The zero-work server: vLLM's shapes through saltbench's client, a prefix cache that honours
the salt, and whole runs against it (including a small soak) with nothing failed."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from cliproc import saltbench_process

from bench.client.connections import streaming
from bench.engine.capabilities import ALWAYS
from bench.engine.open import open_target
from bench.measured.records import read_records
from bench.options import target_args
from bench.paths import PATHS, media_paths
from bench.paths.base import PathContext
from bench.paths.media_urls import MediaUrls
from bench.results import read_results
from bench.run.exchange import exchange
from bench.verdicts.requests import full_hit_tokens
from bench.verdicts.runs import problems
from bench.workload import Workload, generate, load_workload
from bench.zerowork import ZeroWorkServer
from bench.zerowork.cache import PrefixCache
from bench.zerowork.tokens import Prompt, render_chat

BLOCK = 32


@pytest.fixture(scope="module")
def zerowork() -> Iterator[ZeroWorkServer]:
    with ZeroWorkServer(block_size=BLOCK) as server:
        yield server


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return load_workload(generate("image", requests=2, out=tmp_path_factory.mktemp("wl") / "image"))


def _messages(workload: Workload) -> list[dict]:
    media_id = next(iter(workload.media))
    nonce = secrets.token_hex(4)  # its own first block: independent of other tests
    return [{"role": "system", "content": [{"type": "text", "text": f"[{nonce}] " + "be brief " * 20}]},
            {"role": "user", "content": [{"type": "text", "text": "what is in this image?"},
                                         {"type": "image", "media": media_id}]}]


async def _send(url: str, workload: Workload, path_name: str, messages: list[dict],
                salts: list[str | None]) -> list[dict]:
    path = PATHS[path_name](PathContext(url, "zerowork", workload.media, MediaUrls("data")))
    async with aiohttp.ClientSession() as session, streaming():
        return [await exchange(session, path, messages, 3, salt, 30) for salt in salts]


def test_the_server_reports_what_a_vllm_target_needs(zerowork: ZeroWorkServer) -> None:
    with open_target(target_args(server_url=zerowork.url)) as target:
        assert (target.model, target.block_size) == ("zerowork", BLOCK)
        assert target.metadata["vllm_version"] == "0.0.0+zerowork"
        assert target.metadata["prompt_tokens_details"] == ALWAYS
        assert target.metadata["routes_unavailable"] == {}
        assert {"token_ids", "features", "content_parts"} <= set(target.metadata["generate_fields"])


@pytest.mark.parametrize("path", list(PATHS))
def test_every_path_streams_and_the_cache_honours_the_salt(zerowork: ZeroWorkServer,
                                                           images: Workload, path: str) -> None:
    a, b = secrets.token_hex(8), secrets.token_hex(8)
    got = asyncio.run(_send(zerowork.url, images, path, _messages(images), [None, None, a, a, b]))
    assert all(g["ok"] for g in got), [g["error"] for g in got]
    assert {(g["output_tokens"], len(g["itl_token_ms"])) for g in got} == {(3, 2)}
    n = got[0]["prompt_tokens"]
    assert n > BLOCK and {g["prompt_tokens"] for g in got} == {n}
    full = full_hit_tokens(n, BLOCK)
    assert [g["cached_tokens"] for g in got] == [0, full, 0, full, 0]


def test_media_paths_agree_on_the_prompt_and_share_its_cache(zerowork: ZeroWorkServer,
                                                             images: Workload) -> None:
    messages, salt = _messages(images), secrets.token_hex(8)
    first, *others = [asyncio.run(_send(zerowork.url, images, p, messages, [salt]))[0]
                      for p in media_paths()]
    assert {r["prompt_tokens"] for r in [first, *others]} == {first["prompt_tokens"]}
    assert first["cached_tokens"] == 0
    assert {r["cached_tokens"] for r in others} == {full_hit_tokens(first["prompt_tokens"], BLOCK)}


def test_itl_and_output_tokens_are_the_servers_and_it_stops_with_its_context(
        images: Workload) -> None:
    salt = secrets.token_hex(8)
    with ZeroWorkServer(itl_ms=20, output_tokens=4) as server:
        (got,) = asyncio.run(_send(server.url, images, "chat", _messages(images), [salt]))
        assert server.stderr_tail() == ""  # nothing logged, least of all the salt
        pid = server.proc.pid
    assert got["ok"] and got["output_tokens"] == 4
    assert len(got["itl_token_ms"]) == 3 and min(got["itl_token_ms"]) >= 15
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_media_identity_and_salt_key_the_blocks() -> None:
    cache = PrefixCache(4)

    def prompt(url: str) -> Prompt:
        text = [{"type": "text", "text": "one two three four five six seven eight"}]
        return render_chat([{"role": "user", "content": [
            *text, {"type": "image_url", "image_url": {"url": url}}, *text]}])

    assert cache.admit(prompt("data:a"), None) == 0
    n = len(prompt("data:a").token_ids)
    assert cache.admit(prompt("data:a"), None) == (n - 1) // 4 * 4
    # A different image shares the blocks before its placeholders only.
    offset = prompt("data:b").media[0].offset
    assert cache.admit(prompt("data:b"), None) == offset // 4 * 4
    assert cache.admit(prompt("data:a"), "tenant") == 0


def test_a_smoke_run_completes_with_nothing_failed(zerowork: ZeroWorkServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with saltbench_process("run", "--server-url", zerowork.url, "--spec", "smoke",
                           "--out", str(out)) as proc:
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    results = read_results(out / "results.json")
    assert problems(results) == []
    assert len(results["passes"]) == 2 * len(PATHS)
    assert all(p["failed"] == 0 and p["counters_agree"] is True for p in results["passes"])
    assert results["judgements"]["counts"]["met"] > 0


def test_soak_2000_requests_at_concurrency_128(zerowork: ZeroWorkServer, tmp_path: Path) -> None:
    n, out = 2000, tmp_path / "soak"
    generate("image", requests=n)  # outside the timed run (cached between sessions)
    with saltbench_process("run", "--server-url", zerowork.url, "--spec", "image",
                           "--requests", str(n), "--max-concurrency", "128", "--paths", "chat",
                           "--salt-modes", "salted", "--warmup", "0", "--allow-unjudged",
                           "--out", str(out)) as proc:
        stdout, stderr = proc.communicate(timeout=300)
    # 128 in flight leave many requests between their bounds: allowed (the subject is load).
    assert proc.returncode == 0, stderr[-3000:]
    records = read_records(out / "records.jsonl")
    (measured,) = read_results(out / "results.json")["passes"]
    served = measured["counters"]["vllm:request_success_total"]
    assert len(records) == served == n
    assert measured["failed"] == 0 and all(r["ok"] for r in records)
    assert measured["counters_agree"] is True
