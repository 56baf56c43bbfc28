"""The lean HTTP/1.1 client on the wire: keep-alive, framing, headers, closing, bad replies.

A raw asyncio server in the test's own loop plays exact bytes (a fake is fine for the
client's own edge cases; how vLLM behaves is tested against vLLM).
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bench.client import connections
from bench.client.connections import seen_headers, streaming
from bench.client.stream import StreamResult, post_stream
from bench.vocab import Failure

EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
DONE = b"data: [DONE]\n\n"


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"X-Saltbench-Replica: 127.0.0.1:1\r\nTransfer-Encoding: chunked\r\n\r\n")
GOOD = SSE_HEAD + chunked(EVENT, EVENT, DONE)


class RawServer:
    """Answers each request with the next of ``replies`` (bytes; None: close unanswered);
    a reply with ``Connection: close`` closes after it. Records heads and connections."""

    def __init__(self, replies: list[bytes | None]) -> None:
        self.replies, self.heads, self.connections, self.closed = list(replies), [], 0, 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                self.heads.append(head.decode())
                reply = self.replies.pop(0)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
                if b"Connection: close" in reply:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed += 1
            writer.close()


def serve(replies: list[bytes | None],
          client: Callable[[str, RawServer], Awaitable[object]]) -> tuple[object, RawServer]:
    """Run ``client(url, server)`` against a raw server playing ``replies``."""
    server = RawServer(replies)

    async def go() -> object:
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        try:
            return await client(f"http://127.0.0.1:{port}/v1/chat/completions", server)
        finally:
            listener.close()

    return asyncio.run(go()), server


def is_token_event(event: dict) -> int:
    return len(event.get("choices") or [])


async def post(url: str, **kw: float) -> StreamResult:
    return await post_stream(url, {"q": 1}, is_token_event=is_token_event,
                             **{"timeout_s": 5.0, **kw})


def test_one_keep_alive_connection_serves_a_closed_loop() -> None:
    async def client(url: str, server: RawServer) -> list[StreamResult]:
        async with streaming({"Authorization": "Bearer k"}):
            return [await post(url) for _ in range(20)]

    results, server = serve([GOOD] * 20, client)
    assert all(r.ok and r.n_events == 2 for r in results), results[0].error
    assert server.connections == 1
    assert all("Authorization: Bearer k\r\n" in h and "Content-Length: 7\r\n" in h
               and h.startswith("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:")
               for h in server.heads)


def test_concurrent_requests_open_one_connection_each_and_reuse_them() -> None:
    async def client(url: str, server: RawServer) -> list[StreamResult]:
        async with streaming():
            first = await asyncio.gather(*(post(url) for _ in range(4)))
            return [*first, *await asyncio.gather(*(post(url) for _ in range(4)))]

    results, server = serve([GOOD] * 8, client)
    assert all(r.ok for r in results)
    assert server.connections == 4


def test_reply_headers_reach_the_attribution_list() -> None:
    async def client(url: str, server: RawServer) -> list:
        seen: list = []
        token = seen_headers.set(seen)
        try:
            async with streaming():
                await post(url)
        finally:
            seen_headers.reset(token)
        return seen

    seen, _ = serve([GOOD], client)
    assert [h["x-saltbench-replica"] for h in seen] == ["127.0.0.1:1"]


def test_a_body_delimited_by_the_connection_end() -> None:
    close_delimited = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                       b"Connection: close\r\n\r\n" + EVENT + DONE)

    async def client(url: str, server: RawServer) -> list[StreamResult]:
        async with streaming():
            return [await post(url), await post(url)]

    results, server = serve([close_delimited, close_delimited], client)
    assert all(r.ok and r.n_events == 1 for r in results), results[0].error
    assert server.connections == 2  # never reused


def test_a_server_that_closed_an_idle_connection_costs_nothing() -> None:
    once = GOOD.replace(b"Transfer-Encoding", b"Connection: close\r\nTransfer-Encoding")

    async def client(url: str, server: RawServer) -> list[StreamResult]:
        async with streaming():
            first = await post(url)
            await asyncio.sleep(0.05)  # the close reaches the client
            return [first, await post(url)]

    results, server = serve([once, GOOD], client)
    assert all(r.ok for r in results) and server.connections == 2


def test_idle_connections_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "IDLE_S", 0.0)

    async def client(url: str, server: RawServer) -> list[StreamResult]:
        async with streaming():
            return [await post(url) for _ in range(3)]

    results, server = serve([GOOD] * 3, client)
    assert all(r.ok for r in results) and server.connections == 3


@pytest.mark.parametrize(("reply", "kind", "error"), [
    (b"SPDY/9 200 OK\r\n\r\n", Failure.MALFORMED, "invalid HTTP reply: "),
    (SSE_HEAD + chunked(EVENT, b"data: \xff\xfe\n\n", DONE), Failure.MALFORMED,
     "stream is not UTF-8: "),
    (b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n", Failure.HTTP_4XX,
     "HTTP 429: Too Many Requests"),
    (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 12\r\n\r\n{\"error\": 1}",
     Failure.HTTP_5XX, "HTTP 503: 1"),
    (None, Failure.RESET, "the server closed the connection before replying"),
])
def test_bad_replies_are_failures_of_their_kind(reply: bytes | None, kind: str,
                                                error: str) -> None:
    async def client(url: str, server: RawServer) -> StreamResult:
        async with streaming():
            return await post(url)

    result, _ = serve([reply], client)
    assert (result.ok, result.failure) == (False, kind), result.error
    assert result.error.startswith(error), result.error


def test_a_failed_or_cancelled_stream_closes_its_connection() -> None:
    hanging = SSE_HEAD + b"%x\r\n%s\r\n" % (len(EVENT), EVENT)  # then nothing

    async def client(url: str, server: RawServer) -> tuple[StreamResult, int]:
        async with streaming():
            timed_out = await post(url, timeout_s=0.2)
            task = asyncio.create_task(post(url))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(100):
                await asyncio.sleep(0.01)
                if server.closed == 2:
                    break
            return timed_out, server.closed

    (timed_out, closed), server = serve([hanging, hanging], client)
    assert timed_out.failure == Failure.TIMEOUT_TOTAL and timed_out.n_events == 1
    assert server.connections == 2 and closed == 2  # both closed by the client, not reused


def test_streams_need_a_scope() -> None:
    with pytest.raises(RuntimeError, match="streaming"):
        asyncio.run(post("http://127.0.0.1:1/"))


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl's command line)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def test_https_streams_verify_the_server(certificate: tuple[Path, Path],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def go() -> list[StreamResult]:
        server = RawServer([GOOD, GOOD])
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=context)
        url = f"https://127.0.0.1:{listener.sockets[0].getsockname()[1]}/v1/chat/completions"
        try:
            async with streaming():
                untrusted = await post(url)
            monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trust it from now on
            async with streaming():
                return [untrusted, await post(url)]
        finally:
            listener.close()

    untrusted, trusted = asyncio.run(go())
    assert untrusted.failure == Failure.CONNECT, untrusted.error
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.error
    assert trusted.ok and trusted.n_events == 2, trusted.error
