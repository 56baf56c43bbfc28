"""Keep-alive HTTP/1.1 connections for the measured streams, as lean as a client can be.

Each connection is an asyncio protocol whose replies httptools (llhttp, Node.js's parser)
parses in C; body bytes go straight to the caller's sink with the time they arrived, so
a stream is timed by when its bytes reached the process, not by when a coroutine got
round to them. Requests are encoded once per URL (head) plus the body. Everything else
saltbench sends (renders, probes, scrapes) goes through aiohttp.

A scope owns the connections: ``async with streaming(headers):`` opens one for the
current task and those it starts, :func:`post` uses it, and leaving closes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

from bench.vocab import Failure

#: Idle connections older than this are not reused: uvicorn (vLLM) closes them at 5 s.
IDLE_S = 4.0
#: Bytes of a non-200 reply's body kept for its error message.
MAX_ERROR_BODY = 64 * 1024
USER_AGENT = "saltbench"

#: ``sink(chunk, arrived)`` takes body bytes and their ``time.perf_counter()`` arrival;
#: it returns False to stop reading (the connection is then closed).
Sink = Callable[[bytes, float], bool]

_current: contextvars.ContextVar[Connections | None] = contextvars.ContextVar(
    "saltbench_connections", default=None)
#: When set (a list), every reply's headers are appended to it (replica attribution).
seen_headers: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "saltbench_seen_headers", default=None)


@dataclass
class Reply:
    """The outcome of one POST: status and headers (lower-case names) once they came,
    a non-200 reply's body, and the failure kind and error if it did not complete."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    failure: str | None = None
    error: str | None = None
    #: A first body byte arrived.
    started: bool = False


class _Exchange:
    """One request in flight on a connection: the parser's callbacks fill its reply."""

    def __init__(self, sink: Sink, loop: asyncio.AbstractEventLoop) -> None:
        self.sink, self.reply = sink, Reply()
        self.finished: asyncio.Future = loop.create_future()
        self.close_delimited = True
        self.stopped = False

    def end(self, failure: str | None = None, error: str | None = None) -> None:
        if not self.finished.done():
            self.reply.failure, self.reply.error = failure, error
            self.finished.set_result(None)

    def no_first_byte(self, error: str) -> None:
        if not self.reply.started:
            self.end(Failure.TIMEOUT_FIRST_BYTE, error)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one exchange at a time."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.exchange: _Exchange | None = None
        self.lost = False
        self.idle_since = 0.0
        self.arrived = 0.0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.arrived = time.perf_counter()
        ex = self.exchange
        if ex is None or ex.finished.done():
            self.lost = True  # bytes nobody asked for: the connection cannot be trusted
            self.transport.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.lost = True
            ex.end(Failure.MALFORMED, f"invalid HTTP reply: {exc}")
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        ex = self.exchange
        if ex is None or ex.finished.done():
            return
        reason = f": {exc}" if exc else ""
        if ex.reply.status is None:
            ex.end(Failure.RESET, f"the server closed the connection before replying{reason}")
        elif ex.close_delimited and exc is None:
            ex.end()  # the body ran to the end of the connection
        else:
            ex.end(Failure.RESET, f"the server closed the connection mid-reply{reason}")

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.exchange.reply.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        ex = self.exchange
        reply = ex.reply
        reply.status = self.parser.get_status_code()
        ex.close_delimited = ("content-length" not in reply.headers
                              and "transfer-encoding" not in reply.headers)

    def on_body(self, body: bytes) -> None:
        ex = self.exchange
        if ex.stopped:
            return
        ex.reply.started = True
        if ex.reply.status == 200:
            if not ex.sink(body, self.arrived):
                ex.stopped = True
                self.lost = True
                ex.end()
                self.transport.close()
        elif len(ex.reply.body) < MAX_ERROR_BODY:
            ex.reply.body += body

    def on_message_complete(self) -> None:
        ex = self.exchange
        if not self.parser.should_keep_alive():
            self.lost = True
        ex.end()


@dataclass(frozen=True)
class _Origin:
    host: str
    port: int
    tls: bool
    head: bytes  # the request head up to the Content-Length value


class Connections:
    """Idle keep-alive connections by origin, and the request heads by URL."""

    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        self.headers = dict(headers or {})
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}
        self._origins: dict[str, _Origin] = {}
        self._busy: set[_Connection] = set()
        self._tls: ssl.SSLContext | None = None

    def _origin(self, url: str) -> _Origin:
        origin = self._origins.get(url)
        if origin is None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http(s) URL: {url!r}")
            tls = parts.scheme == "https"
            target = parts.path or "/"
            if parts.query:
                target += "?" + parts.query
            extra = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
            head = (f"POST {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                    f"User-Agent: {USER_AGENT}\r\n{extra}"
                    "Content-Type: application/json\r\nContent-Length: ").encode("latin-1")
            origin = self._origins[url] = _Origin(parts.hostname, parts.port or (443 if tls else 80),
                                                  tls, head)
        return origin

    async def _acquire(self, origin: _Origin, connect_timeout_s: float) -> _Connection:
        idle = self._idle.get((origin.host, origin.port, origin.tls))
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if not conn.lost and now - conn.idle_since < IDLE_S:
                return conn
            conn.transport.close()
        if origin.tls and self._tls is None:
            self._tls = ssl.create_default_context()
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(_Connection, origin.host, origin.port,
                                   ssl=self._tls if origin.tls else None),
            connect_timeout_s)
        return conn

    def _release(self, origin: _Origin, conn: _Connection) -> None:
        self._busy.discard(conn)
        conn.exchange = None
        if conn.lost:
            conn.transport.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.setdefault((origin.host, origin.port, origin.tls), []).append(conn)

    async def post(self, url: str, body: bytes, sink: Sink, *, timeout_s: float,
                   connect_timeout_s: float, first_byte_timeout_s: float | None,
                   start: float) -> Reply:
        """POST ``body`` (JSON) to ``url``; a 200 reply's body goes to ``sink``, another's
        is kept. Never raises but on cancellation: a failure is in the reply. Timeouts
        count from ``start`` (``time.perf_counter()``): ``connect_timeout_s`` to open a
        connection, ``first_byte_timeout_s`` (None: none) to the first body byte,
        ``timeout_s`` to the end of the reply."""
        origin = self._origin(url)
        try:
            conn = await self._acquire(origin, connect_timeout_s)
        except asyncio.TimeoutError:
            return Reply(failure=Failure.TIMEOUT_CONNECT,
                         error=f"connect timeout after {connect_timeout_s:g} s")
        except OSError as exc:
            detail = (str(exc) if isinstance(exc, ssl.SSLError)  # its errno is not the cause
                      else exc.strerror if isinstance(exc, socket.gaierror)
                      else os.strerror(exc.errno) if exc.errno else str(exc))
            return Reply(failure=Failure.CONNECT,
                         error=f"cannot connect to {origin.host}:{origin.port}: {detail}")
        loop = asyncio.get_running_loop()
        ex = conn.exchange = _Exchange(sink, loop)
        self._busy.add(conn)
        total = loop.call_at(loop.time() + start + timeout_s - time.perf_counter(), ex.end,
                             Failure.TIMEOUT_TOTAL, f"timeout after {timeout_s:g} s")
        first = None if first_byte_timeout_s is None else loop.call_at(
            loop.time() + start + first_byte_timeout_s - time.perf_counter(), ex.no_first_byte,
            f"first-byte timeout after {first_byte_timeout_s:g} s")
        try:
            conn.transport.write(b"%s%d\r\n\r\n%s" % (origin.head, len(body), body))
            await ex.finished
        finally:
            total.cancel()
            if first is not None:
                first.cancel()
            if ex.finished.cancelled() or not ex.finished.done() or ex.reply.failure:
                conn.lost = True  # cancelled or failed mid-reply: never reuse
            self._release(origin, conn)
        if (headers := seen_headers.get()) is not None and ex.reply.status is not None:
            headers.append(ex.reply.headers)
        return ex.reply

    def close(self) -> None:
        """Close every connection, idle or busy."""
        for conns in [*self._idle.values(), [*self._busy]]:
            for conn in conns:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()
        self._busy.clear()


def current() -> Connections:
    """The connections of the enclosing :func:`streaming` scope."""
    conns = _current.get()
    if conns is None:
        raise RuntimeError("no connections: send streams inside `async with streaming():`")
    return conns


@contextlib.asynccontextmanager
async def streaming(headers: Mapping[str, str] | None = None) -> AsyncIterator[Connections]:
    """A scope whose streamed requests share keep-alive connections, sending ``headers``
    (e.g. ``Authorization``) with each; the connections are closed when it ends."""
    conns = Connections(headers)
    token = _current.set(conns)
    try:
        yield conns
    finally:
        _current.reset(token)
        conns.close()
