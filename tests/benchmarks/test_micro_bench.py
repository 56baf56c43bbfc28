"""Micro-benchmarks of the client's hot spots: SSE parsing, event timing, request building
per path, record writing, media URLs and media encoding.

Timings are benchmark output (the table, and ``extra_info`` per operation), never asserted:
each test asserts only that what it timed came out right. The streams are the zero-work
server's own bytes (:mod:`bench.zerowork.sse`: vLLM's chunk shapes); the generate paths
render against a real :class:`ZeroWorkServer`, so their build includes that loopback call,
as a run's ``build_ms`` does.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest

from bench import SCHEMA_VERSION
from bench.client.connections import streaming
from bench.client.stream import SseDecoder, StreamResult, _EventTimer
from bench.measured.records import Exchange, RecordWriter
from bench.media import MediaFile, audio, file_digest, image, video
from bench.paths import PATHS, make_paths
from bench.paths.base import PathContext, carries_tokens, is_token_event
from bench.paths.media_urls import MediaUrls
from bench.run.exchange import exchange
from bench.workload import MediaItem
from bench.zerowork import ZeroWorkServer
from bench.zerowork.sse import DONE, ChatStream, GenerateStream, Usage

# Short rounds: the whole file stays within a few seconds with benchmarks enabled (as in CI).
pytestmark = pytest.mark.benchmark(max_time=0.15, min_rounds=20)

MODEL = "Qwen/Qwen2.5-VL-3B-Instruct"
TOKENS = 16
USAGE = Usage(prompt_tokens=1234, completion_tokens=TOKENS, cached_tokens=1024,
              media_tokens={"image": 256})


def per_op(benchmark, unit: str, count: int) -> None:
    """``extra_info["us_per_<unit>"]``: the median round over ``count`` operations
    (absent with ``--benchmark-disable``, which times nothing)."""
    if benchmark.stats is not None:
        benchmark.extra_info[f"us_per_{unit}"] = round(benchmark.stats.stats.median / count * 1e6, 3)


# --- SSE parsing and event timing ---------------------------------------------------------

def chat_stream(tokens: int = TOKENS) -> bytes:
    """A streamed chat completion as vLLM writes it: role chunk, ``tokens`` text chunks
    (the last with ``finish_reason``), the usage chunk and ``[DONE]``."""
    s = ChatStream(json.dumps(MODEL))
    return (s.opening() + s.token(False) * (tokens - 1) + s.token(True) + s.usage(USAGE)
            + DONE)


def generate_stream(tokens: int = TOKENS) -> bytes:
    """A streamed ``/inference/v1/generate``: ``tokens`` token-id chunks, usage, ``[DONE]``."""
    s = GenerateStream("cmpl-0123456789abcdef0123456789abcdef")
    return s.token(False) * (tokens - 1) + s.token(True) + s.usage(USAGE) + DONE


def split(data: bytes, how: str | int) -> list[bytes]:
    """``whole``, one chunk per SSE ``event`` (how vLLM's server writes), or ``n`` bytes each."""
    if how == "whole":
        return [data]
    if how == "event":
        return [event + b"\n\n" for event in data.split(b"\n\n")[:-1]]
    return [data[i:i + how] for i in range(0, len(data), how)]


def decode(chunks: list[bytes]) -> list[str]:
    decoder = SseDecoder()
    payloads = []
    for chunk in chunks:
        payloads += decoder.feed(chunk)
    return payloads + decoder.close()


STREAMS: dict[str, tuple[Callable[[], bytes], int]] = {
    # name: (stream, payloads: token chunks (+ chat's role chunk) + usage + [DONE])
    "chat": (chat_stream, 1 + TOKENS + 2),
    "generate": (generate_stream, TOKENS + 2),
}


@pytest.mark.parametrize("how", ["whole", "event", 64])
@pytest.mark.parametrize("kind", list(STREAMS))
def test_sse_decoder_feed(benchmark, kind: str, how: str | int) -> None:
    make, expected = STREAMS[kind]
    data = make()
    chunks = split(data, how)
    reference = decode([data])
    assert len(reference) == expected and reference[-1] == "[DONE]"
    benchmark.group = "sse-decode"
    payloads = benchmark(decode, chunks)
    assert payloads == reference
    benchmark.extra_info.update({"bytes": len(data), "chunks": len(chunks), "payloads": expected})
    per_op(benchmark, "payload", expected)


def test_sse_decoder_feed_one_byte_at_a_time(benchmark) -> None:
    data = chat_stream(tokens=2)  # small: every byte is a feed() call
    chunks = split(data, 1)
    benchmark.group = "sse-decode"
    payloads = benchmark(decode, chunks)
    assert payloads == decode([data]) and len(payloads) == 1 + 2 + 2
    benchmark.extra_info.update({"bytes": len(data), "chunks": len(chunks), "payloads": 5})
    per_op(benchmark, "byte", len(data))


def test_event_timer_handle(benchmark) -> None:
    """The per-event work after decoding: JSON, the token rules, timestamps, usage."""
    payloads = decode([chat_stream()])

    def timed() -> tuple[StreamResult, tuple]:
        result = StreamResult(start_s=time.perf_counter())
        timer = _EventTimer(result, is_token_event, carries_tokens)
        timer.handle(payloads, time.perf_counter())
        timer.finish([])
        return result, timer.verdict()

    benchmark.group = "sse-timer"
    result, verdict = benchmark(timed)
    assert verdict == (None, None)
    assert result.n_events == 1 + TOKENS + 1  # [DONE] is not an event
    assert len(result.itl_s) == TOKENS  # the role chunk is vLLM's first token event
    assert len(result.token_itl_s) == TOKENS - 1
    assert result.usage == USAGE.body()
    benchmark.extra_info["events"] = result.n_events
    per_op(benchmark, "event", result.n_events)


# --- request building, record writing ------------------------------------------------------

@pytest.fixture(scope="module")
def image_item(tmp_path_factory: pytest.TempPathFactory) -> MediaItem:
    """A ~50 KB PNG (noise does not compress)."""
    written = image.write(tmp_path_factory.mktemp("media") / "noise", kind="noise", width=128,
                          height=128, seed=1, fmt="png", quality=90)
    sha256, size = file_digest(written.path)
    return MediaItem(id="img0", modality="image", path=written.path, mime=written.mime,
                     sha256=sha256, bytes=size, content_id="img0", variant=False,
                     params=written.params)


@pytest.fixture(scope="module")
def zerowork() -> Iterator[ZeroWorkServer]:
    with ZeroWorkServer() as server:
        yield server


@pytest.fixture(scope="module")
def loop_session() -> Iterator[tuple[asyncio.AbstractEventLoop, aiohttp.ClientSession]]:
    """One event loop and one session (kept-alive connections) for every build of the module."""
    loop = asyncio.new_event_loop()

    async def open_session() -> aiohttp.ClientSession:
        return aiohttp.ClientSession()

    session = loop.run_until_complete(open_session())
    try:
        yield loop, session
    finally:
        loop.run_until_complete(session.close())
        loop.close()


SYSTEM = "You are a careful assistant who answers in one short paragraph. " * 12


def messages(with_image: bool) -> list[dict]:
    """A two-message manifest request: a long system prompt, a question, maybe an image."""
    user = [{"type": "text", "text": "What is shown here, and what colour dominates?"}]
    if with_image:
        user.append({"type": "image", "media": "img0"})
    return [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
            {"role": "user", "content": user}]


@pytest.mark.parametrize("request_kind", ["text", "image"])
@pytest.mark.parametrize("path_name", list(PATHS))
def test_build_request(benchmark, zerowork, loop_session, image_item, path_name: str,
                       request_kind: str) -> None:
    """One ``build``; the image's data URL is cached after the first round, as in a run
    (``test_media_url_first_call`` times the first)."""
    loop, session = loop_session
    ctx = PathContext(zerowork.url, "zerowork", {"img0": image_item}, MediaUrls("data"))
    [path] = make_paths([path_name], ctx)
    msgs = messages(request_kind == "image")
    benchmark.group = "build"
    url, body = benchmark(lambda: loop.run_until_complete(path.build(session, msgs, 16, "s1")))
    assert url.startswith(zerowork.url) and body["stream"] is True and body["cache_salt"] == "s1"
    if path_name == "chat":
        assert body["messages"][0]["content"][0]["text"] == SYSTEM
    else:
        assert body["token_ids"] and body["sampling_params"]["max_tokens"] == 16
    carries_media = request_kind == "image" and not path.text_only
    assert media_items(path_name, body) == (1 if carries_media else 0)
    benchmark.extra_info.update({"render_call": path_name != "chat",
                                 "body_bytes": len(json.dumps(body))})


def media_items(path_name: str, body: dict) -> int:
    """How many media items a built body carries, in its path's form."""
    if path_name == "chat":
        return sum(p["type"] == "image_url" for m in body["messages"] for p in m["content"])
    if path_name == "generate-features":
        return len(((body.get("features") or {}).get("mm_hashes") or {}).get("image", []))
    return len(body.get("content_parts") or [])


def test_record_writer_write(benchmark, zerowork, loop_session, image_item, tmp_path) -> None:
    """One line of ``records.jsonl``: a real exchange with the zero-work server plus the
    run's fields, as the runner writes it."""
    loop, session = loop_session
    ctx = PathContext(zerowork.url, "zerowork", {"img0": image_item}, MediaUrls("data"))
    [path] = make_paths(["chat"], ctx)

    async def send() -> Exchange:
        async with streaming():
            return await exchange(session, path, messages(True), TOKENS, "s1", 30)

    measured = loop.run_until_complete(send())
    assert measured["ok"], measured["error"]
    record = {"schema_version": SCHEMA_VERSION, "run_id": "20250101T000000Z-0123abcd",
              "phase": "measure", "pass": 3, "path": "chat", "salt_mode": "per-tenant",
              "salt_digest": "9f86d081884c7d65", "request_id": "mixed-0042", "case": "shared-prefix",
              "tenant": "tenant-b", "modality": "image", "oracle": "partial-hit",
              "segment": 0, "start_s": 12.345678, **measured, "end_s": 12.401234, "seq": 42}
    out = tmp_path / "records.jsonl"
    calls = 0

    def write() -> None:
        nonlocal calls
        calls += 1
        writer.write(record)

    benchmark.group = "records"
    with RecordWriter(out) as writer:
        benchmark(write)
    lines = out.read_bytes().splitlines()
    assert len(lines) == calls and json.loads(lines[-1]) == record
    benchmark.extra_info["line_bytes"] = len(lines[-1]) + 1


# --- media URLs and media encoding ---------------------------------------------------------

def test_media_url_first_call(benchmark, image_item) -> None:
    """Read and base64 the file: a fresh MediaUrls per round, so its cache is cold."""
    benchmark.group = "media-url"
    url = benchmark.pedantic(lambda urls: urls.url(image_item.path, image_item.mime),
                             setup=lambda: ((MediaUrls("data"),), {}), rounds=100, warmup_rounds=3)
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix) and base64.b64decode(url[len(prefix):]) == image_item.path.read_bytes()
    benchmark.extra_info.update({"file_bytes": image_item.bytes, "url_chars": len(url)})


def test_media_url_cached(benchmark, image_item) -> None:
    urls = MediaUrls("data")
    first = urls.url(image_item.path, image_item.mime)
    benchmark.group = "media-url"
    assert benchmark(urls.url, image_item.path, image_item.mime) is first
    benchmark.extra_info["file_bytes"] = image_item.bytes


#: name: (MIME type, writer of one small item at ``stem``)
ENCODERS: dict[str, tuple[str, Callable[[Path], MediaFile]]] = {
    "image-png-64": ("image/png", lambda stem: image.write(
        stem, kind="gradient", width=64, height=64, seed=0, fmt="png", quality=90)),
    "image-jpeg-64": ("image/jpeg", lambda stem: image.write(
        stem, kind="shapes", width=64, height=64, seed=0, fmt="jpeg", quality=85)),
    "audio-wav-0.5s": ("audio/wav", lambda stem: audio.write(
        stem, kind="tone", sample_rate=16000, channels=1, duration_s=0.5, seed=0, subtype="PCM_16")),
    "video-mp4-64x8": ("video/mp4", lambda stem: video.write(
        stem, kind="moving-box", width=64, height=64, fps=4, frame_count=8, seed=0, crf=23)),
}


@pytest.mark.parametrize("name", list(ENCODERS))
def test_media_encode(benchmark, tmp_path, name: str) -> None:
    mime, write = ENCODERS[name]
    benchmark.group = "media-encode"
    written = benchmark(write, tmp_path / "item")
    size = written.path.stat().st_size
    assert written.mime == mime and size > 0
    assert file_digest(written.path) == file_digest(write(tmp_path / "again").path)  # deterministic
    benchmark.extra_info["file_bytes"] = size
