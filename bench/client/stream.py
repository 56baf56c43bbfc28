"""One streaming POST to an OpenAI-compatible endpoint, timed as ``vllm bench serve`` times it.

The timing copies ``async_request_openai_chat_completions`` in
``vllm/benchmarks/lib/endpoint_request_func.py``: the clock starts just before the
request is sent; a token event is stamped when the bytes that complete its SSE message
arrive (vLLM stamps it after reading them, before JSON decoding: the same moment, less
its own delay in getting round to them); the first token event gives TTFT, each later
one an ITL gap; E2EL ends at the last *token* event, so the trailing usage chunk and
``[DONE]`` do not count.
An optional second rule, ``carries_tokens``, times the gaps between events that carry
generated text or token ids only (chat's role-only first chunk is a token event for vLLM's
rule but carries no token), so that paths compare like with like.
"""

from __future__ import annotations

import codecs
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import orjson

from bench.client.connections import Reply, current
from bench.vocab import Failure

DONE = "[DONE]"
MAX_ERROR_CHARS = 500
#: Default seconds to open a connection (``--connect-timeout``).
CONNECT_TIMEOUT_S = 30.0


@dataclass
class StreamResult:
    """Outcome of one streamed request; timings in seconds, ``None`` where never reached."""

    ok: bool = False
    status: int | None = None
    failure: str | None = None  # a bench.vocab.FAILURES kind
    error: str | None = None
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    token_itl_s: list[float] = field(default_factory=list)
    e2el_s: float | None = None
    usage: dict | None = None
    n_events: int = 0
    start_s: float = 0.0


class SseDecoder:
    """Incremental Server-Sent-Events decoder: bytes in, complete ``data`` payloads out.

    Events are separated by a blank line; LF and CRLF line ends are accepted; comment
    lines (``:``) and fields other than ``data`` are ignored; several ``data`` lines in
    one event are joined with ``\\n`` as the SSE specification says.
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._buffer = ""

    def feed(self, chunk: bytes) -> list[str]:
        """Add bytes; return the payloads of the events they complete."""
        self._buffer = (self._buffer + self._utf8.decode(chunk)).replace("\r\n", "\n")
        *blocks, self._buffer = self._buffer.split("\n\n")
        return [data for data in map(_event_data, blocks) if data is not None]

    def close(self) -> list[str]:
        """End of stream: return the payload of a last event that lacks its blank line."""
        tail = (self._buffer + self._utf8.decode(b"", final=True)).replace("\r\n", "\n")
        self._buffer = ""
        data = _event_data(tail.strip("\r\n"))
        return [] if data is None else [data]


def _event_data(block: str) -> str | None:
    lines = [line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")]
    return "\n".join(lines) if lines else None


def _error_message(body: Any) -> str | None:
    """The message of an OpenAI-style ``{"error": {"message": ...}}`` body, else ``None``."""
    if not isinstance(body, dict) or body.get("error") is None:
        return None
    error = body["error"]
    if isinstance(error, dict) and "message" in error:
        return str(error["message"])
    return str(error)


def _http_error(reply: Reply) -> tuple[str, str]:
    """A non-200 reply's failure kind and its status with vLLM's message (or the body as
    text, on one line) or the reason phrase."""
    text = reply.body.decode("utf-8", errors="replace")
    try:
        message = _error_message(json.loads(text)) or text
    except ValueError:
        message = text
    status = reply.status
    message = " ".join(message.split()) or _reason(status)
    kind = (Failure.HTTP_5XX if status >= 500 else Failure.HTTP_4XX if status >= 400
            else Failure.MALFORMED)
    return kind, f"HTTP {status}: {message[:MAX_ERROR_CHARS]}"


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "empty body"


class _EventTimer:
    """Timestamps the decoded events of one stream the way vLLM's benchmark client does."""

    def __init__(self, result: StreamResult, is_token_event: Callable[[dict], int],
                 carries_tokens: Callable[[dict], bool] | None) -> None:
        self.result = result
        self.is_token_event, self.carries_tokens = is_token_event, carries_tokens
        self.most_recent_timestamp = result.start_s
        self.last_token_timestamp: float | None = None
        self.done = self.cut = False
        self.failure: str | None = None
        self.error: str | None = None

    def handle(self, payloads: list[str], timestamp: float) -> None:
        """Process event payloads completed by bytes that arrived at ``timestamp``;
        anything after ``[DONE]`` or a failure is ignored."""
        result = self.result
        for data in payloads:
            if self.done or self.failure is not None:
                return
            if data == DONE:
                self.done = True
                return
            result.n_events += 1
            try:
                event = _decode_event(data, result.n_events)
            except ValueError as exc:
                self.failure, self.error = Failure.MALFORMED, str(exc)
                return
            if (message := _error_message(event)) is not None:
                self.failure = Failure.ERROR_EVENT
                self.error = f"error event: {message}"[:MAX_ERROR_CHARS]
                return
            if event.get("usage") is not None:
                result.usage = event["usage"]
            if self.is_token_event(event) > 0:
                if result.ttft_s is None:
                    result.ttft_s = timestamp - result.start_s
                else:
                    result.itl_s.append(timestamp - self.most_recent_timestamp)
                self.most_recent_timestamp = timestamp
            if self.carries_tokens is not None and self.carries_tokens(event):
                if self.last_token_timestamp is not None:
                    result.token_itl_s.append(timestamp - self.last_token_timestamp)
                self.last_token_timestamp = timestamp

    def finish(self, tail: list[str]) -> None:
        """End of stream: a last event without its blank line counts only if it is
        ``[DONE]``; anything else there was cut off."""
        if tail == [DONE]:
            self.handle(tail, self.most_recent_timestamp)
        elif tail:
            self.cut = True

    def verdict(self) -> tuple[str | None, str | None]:
        """The failure kind and error of the stream, ``(None, None)`` when it succeeded."""
        n = self.result.n_events
        if self.failure is not None:
            return self.failure, self.error
        if not self.done:
            cut = " and a partial one" if self.cut else ""
            return Failure.NO_DONE, f"stream ended without [DONE] after {n} events{cut}"
        if self.result.ttft_s is None:
            return Failure.NO_TOKEN, f"no token event before [DONE] ({n} events)"
        return None, None


def _decode_event(data: str, number: int) -> dict:
    try:
        event = orjson.loads(data)
    except ValueError as exc:
        raise ValueError(f"malformed JSON in event {number}: {exc}; data={data[:100]!r}") from None
    if not isinstance(event, dict):
        raise ValueError(f"event {number} is not a JSON object: {data[:100]!r}")
    return event


async def post_stream(
    url: str,
    body: dict,
    *,
    is_token_event: Callable[[dict], int],
    timeout_s: float,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    first_byte_timeout_s: float | None = None,
    carries_tokens: Callable[[dict], bool] | None = None,
) -> StreamResult:
    """POST ``body`` as JSON to ``url`` on the connections of the enclosing
    :func:`bench.client.connections.streaming` scope and time its SSE reply; never raises
    but on cancellation.

    ``is_token_event(event)`` returns how many generated tokens an event carries; events
    with a positive count are the ones timed. ``usage`` comes from the last event whose
    ``usage`` is not null. A failed result has ``ok=False`` and ``failure`` (a
    :data:`bench.vocab.FAILURES` kind) and ``error`` set: a non-200 status, an ``error``
    event, malformed JSON, a transport error, a stream that ends without ``[DONE]`` or
    without any token event, and the timeouts: ``connect_timeout_s`` to open the
    connection, ``first_byte_timeout_s`` (None: none) from the send to the first byte of
    the response body, ``timeout_s`` for the whole request.
    """
    result = StreamResult(start_s=time.perf_counter())
    timer = _EventTimer(result, is_token_event, carries_tokens)
    decoder = SseDecoder()

    def sink(chunk: bytes, arrived: float) -> bool:
        try:
            timer.handle(decoder.feed(chunk), arrived)
        except UnicodeDecodeError as exc:
            timer.failure, timer.error = Failure.MALFORMED, f"stream is not UTF-8: {exc}"
        return timer.failure is None

    reply = await current().post(url, orjson.dumps(body), sink, timeout_s=timeout_s,
                                 connect_timeout_s=connect_timeout_s,
                                 first_byte_timeout_s=first_byte_timeout_s,
                                 start=result.start_s)
    result.status = reply.status
    if reply.failure is not None and timer.failure is None:
        elapsed = time.perf_counter() - result.start_s
        result.failure = reply.failure
        result.error = (f"{reply.error} ({result.n_events} events received, "
                        f"elapsed {elapsed:.3f} s)")[:MAX_ERROR_CHARS + 60]
    elif reply.status != 200:
        result.failure, result.error = _http_error(reply)
    else:
        if timer.failure is None and not timer.done:
            try:
                timer.finish(decoder.close())
            except UnicodeDecodeError as exc:
                timer.failure, timer.error = Failure.MALFORMED, f"stream is not UTF-8: {exc}"
        result.failure, result.error = timer.verdict()
    if result.ttft_s is not None:
        result.e2el_s = timer.most_recent_timestamp - result.start_s
    result.ok = result.failure is None
    return result
