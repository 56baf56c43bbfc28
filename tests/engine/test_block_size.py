"""A server that does not report its block size: saltbench measures it from cached token
counts, or refuses to judge; it never assumes one (no engine: simulated servers and the
zero-work server's prefix cache)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from rich.console import Console

from bench.cli import main
from bench.engine import block_size
from bench.engine.block_size import consistent, measure_block_size
from bench.engine.setup import external_server
from bench.errors import BenchError
from bench.results import read_results
from bench.zerowork.app import Settings, ZeroWork


class Simulated:
    """``chat_usage`` of a server with block size ``block`` whose template adds ``overhead``
    tokens and whose tokeniser makes ``per_unit`` tokens of each filler unit; ``cached``
    rewrites the cached count of a repeat."""

    def __init__(self, block: int, overhead: int = 21, per_unit: int = 1,
                 cached=lambda n, full: full) -> None:
        self.block, self.overhead, self.per_unit, self.rewrite = block, overhead, per_unit, cached
        self.seen: set[tuple[str, str | None]] = set()
        self.lengths: list[int] = []

    def __call__(self, base_url: str, model: str, text: str, headers: dict,
                 salt: str | None = None) -> dict:
        n = self.overhead + self.per_unit * text.count(" x")
        self.lengths.append(n)
        repeat = (text, salt) in self.seen
        self.seen.add((text, salt))
        full = (n - 1) // self.block * self.block
        cached = self.rewrite(n, full) if repeat else 0
        return {"prompt_tokens": n, "prompt_tokens_details": {"cached_tokens": cached}}


def measure(monkeypatch: pytest.MonkeyPatch, server: Simulated, **kw) -> int:
    monkeypatch.setattr(block_size, "chat_usage", server)
    return measure_block_size("http://sim", "m", {}, zero_cached_omitted=False, **kw)


def test_consistent_block_sizes() -> None:
    assert consistent([(50, 0)]) is None  # no hit yet: anything above 49 fits
    assert consistent([(90, 80)]) == [10, 16, 20, 40, 80]  # 80 cached, 9 left over
    assert consistent([(90, 80), (100, 96)]) == [16]
    assert consistent([(90, 80), (30, 0)]) == [40, 80]  # 0 cached of 30: above 29
    assert consistent([(90, 90)]) == []  # a hit on the last token: no block size does that


@pytest.mark.parametrize("block", [1, 8, 16, 32, 48, 64, 128, 256, 528, 1024])
@pytest.mark.parametrize("per_unit, overhead", [(1, 21), (2, 9), (1, 300), (3, 40)])
def test_measures_every_block_size(monkeypatch, block: int, per_unit: int,
                                   overhead: int) -> None:
    if block == 1 and per_unit > 1:
        # Every prompt length has one parity (or residue): 1 and 2 (or 3) look alike.
        with pytest.raises(BenchError, match="still ambiguous"):
            measure(monkeypatch, Simulated(block, overhead, per_unit))
        return
    server = Simulated(block, overhead, per_unit)
    assert measure(monkeypatch, server) == block
    assert len(server.lengths) <= 2 * 8  # probe pairs: growth to 1024 takes 5


def test_refuses_counts_that_no_block_size_explains(monkeypatch) -> None:
    # The repeat reports every token cached, the last one included: no block size fits.
    with pytest.raises(BenchError, match=r"no block size fits.*set --block-size"):
        measure(monkeypatch, Simulated(16, cached=lambda n, full: n))
    # Hits that are partial in an irregular way (full minus 8, when it can be).
    with pytest.raises(BenchError, match="set --block-size"):
        measure(monkeypatch, Simulated(32, cached=lambda n, full: max(full - 8, 0)))


def test_refuses_a_server_that_never_hits(monkeypatch) -> None:
    server = Simulated(16, cached=lambda n, full: 0)
    with pytest.raises(BenchError, match=r"got no cached tokens .*set --block-size"):
        measure(monkeypatch, server, max_tokens=4096)
    assert max(server.lengths) <= 4096


@web.middleware
async def _no_server_info(request: web.Request, handler) -> web.StreamResponse:
    if request.path == "/server_info":
        raise web.HTTPNotFound()
    return await handler(request)


@contextlib.contextmanager
def serving(app: web.Application) -> Iterator[str]:
    """``app`` on a free loopback port, in a thread; yields its base URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


@pytest.fixture
def block_16_server() -> Iterator[str]:
    """The zero-work server with 16-token blocks (vLLM's GPU default) and no /server_info."""
    app = ZeroWork(Settings(block_size=16)).app()
    app.middlewares.append(_no_server_info)
    with serving(app) as url:
        yield url


def test_external_server_measures_its_block_size(block_16_server: str) -> None:
    target = external_server(block_16_server, None, None, None, Console(stderr=True))
    assert target.block_size == 16
    assert target.metadata["block_size_source"] == "measured"
    assert target.metadata["cache_config"]["block_size"] is None  # not reported
    given = external_server(block_16_server, 16, None, None, Console(stderr=True))
    assert (given.block_size, given.metadata["block_size_source"]) == (16, "given")


def test_a_block_16_server_is_judged_by_its_measured_block_size(block_16_server: str,
                                                                tmp_path: Path) -> None:
    """Repeats on a block-16 server get 16-token multiples; judged by an assumed 32 they
    were leaks (exit 1), judged by the measured 16 they are met."""
    out = tmp_path / "run"
    code = main(["run", "--server-url", block_16_server, "--spec", "smoke", "--requests",
                 "12", "--paths", "chat", "--salt-modes", "salted", "--warmup", "0",
                 "--out", str(out)])
    results = read_results(out / "results.json")
    assert results["metadata"]["target"]["block_size"] == 16
    assert results["metadata"]["target"]["block_size_source"] == "measured"
    counts = results["judgements"]["counts"]
    assert counts["leak"] == 0 and counts["under-hit"] == 0 and counts["met"] > 0
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    hits = {r["cached_tokens"] for r in records if r["phase"] == "measure" and r["cached_tokens"]}
    assert hits and any(h % 32 for h in hits)  # block-16 hits that block 32 cannot explain
    assert code == 0


def _refusing_app(cached: str) -> web.Application:
    """A server without /server_info whose chat answers count tokens by words and report
    ``cached`` tokens: "none" (never the field), "zero" (always 0) or "all" (n on repeats)."""
    seen: set[str] = set()

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m", "max_model_len": 2048}]})

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": "0.0.0"})

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        key = json.dumps([body["messages"], body.get("cache_salt")])
        n = 10 + len(re.findall(r"\w+", body["messages"][0]["content"]))
        usage: dict = {"prompt_tokens": n, "completion_tokens": 1}
        if cached != "none":
            usage["prompt_tokens_details"] = {"cached_tokens": n if cached == "all" and
                                              key in seen else 0}
        seen.add(key)
        return web.json_response({"choices": [], "usage": usage})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/version", version)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.mark.parametrize("cached, message", [
    ("none", "reports neither its block size nor cached tokens; set --block-size"),
    ("zero", "got no cached tokens .*set --block-size"),
    ("all", "no block size fits the cached token counts .*set --block-size")])
def test_a_server_that_does_not_tell_is_refused(cached: str, message: str) -> None:
    with serving(_refusing_app(cached)) as url, pytest.raises(BenchError, match=message):
        external_server(url, None, None, None, Console(stderr=True))
