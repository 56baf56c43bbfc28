"""One streaming POST to an OpenAI-compatible endpoint, timed as ``vllm bench serve`` times it.

The timing copies ``async_request_openai_chat_completions`` in
``vllm/benchmarks/lib/endpoint_request_func.py``: the clock starts just before the
request is sent; a token event is stamped when its SSE message is complete (before
JSON decoding); the first token event gives TTFT, each later one an ITL gap; E2EL ends
at the last *token* event, so the trailing usage chunk and ``[DONE]`` do not count.
An optional second rule, ``carries_tokens``, times the gaps between events that carry
generated text or token ids only (chat's role-only first chunk is a token event for vLLM's
rule but carries no token), so that paths compare like with like.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

DONE = "[DONE]"
MAX_ERROR_CHARS = 500


@dataclass
class StreamResult:
    """Outcome of one streamed request; timings in seconds, ``None`` where never reached."""

    ok: bool = False
    status: int | None = None
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


async def _http_error(response: aiohttp.ClientResponse) -> str:
    text = (await response.read()).decode("utf-8", errors="replace")
    try:
        message = _error_message(json.loads(text)) or text
    except ValueError:
        message = text
    return f"HTTP {response.status}: {message.strip()[:MAX_ERROR_CHARS]}"


class _EventTimer:
    """Timestamps the decoded events of one stream the way vLLM's benchmark client does."""

    def __init__(self, result: StreamResult, is_token_event: Callable[[dict], int],
                 carries_tokens: Callable[[dict], bool] | None) -> None:
        self.result = result
        self.is_token_event, self.carries_tokens = is_token_event, carries_tokens
        self.most_recent_timestamp = result.start_s
        self.last_token_timestamp: float | None = None
        self.done = False
        self.error: str | None = None

    def handle(self, payloads: list[str]) -> None:
        """Process event payloads; anything after ``[DONE]`` or an error event is ignored."""
        result = self.result
        for data in payloads:
            timestamp = time.perf_counter()
            if self.done or self.error is not None:
                return
            if data == DONE:
                self.done = True
                return
            result.n_events += 1
            event = _decode_event(data, result.n_events)
            if (message := _error_message(event)) is not None:
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

    def verdict(self) -> str | None:
        """The error that fails the stream, or ``None`` when it succeeded."""
        if self.error is not None:
            return self.error
        if not self.done:
            return f"stream ended without [DONE] after {self.result.n_events} events"
        if self.result.ttft_s is None:
            return f"no token event before [DONE] ({self.result.n_events} events)"
        return None


def _decode_event(data: str, number: int) -> dict:
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"malformed JSON in event {number}: {exc}; data={data[:100]!r}") from None
    if not isinstance(event, dict):
        raise ValueError(f"event {number} is not a JSON object: {data[:100]!r}")
    return event


async def post_stream(
    session: aiohttp.ClientSession,
    url: str,
    body: dict,
    *,
    is_token_event: Callable[[dict], int],
    timeout_s: float,
    carries_tokens: Callable[[dict], bool] | None = None,
) -> StreamResult:
    """POST ``body`` as JSON to ``url`` and time its SSE reply; never raises but on cancellation.

    ``is_token_event(event)`` returns how many generated tokens an event carries; events
    with a positive count are the ones timed. ``usage`` comes from the last event whose
    ``usage`` is not null. The result is failed (``ok=False``, ``error`` set) on a non-200
    status, an ``error`` event, malformed JSON, a transport error, a stream that ends
    without ``[DONE]`` or without any token event, and after ``timeout_s`` (whole request).
    """
    result = StreamResult(start_s=time.perf_counter())
    timer = _EventTimer(result, is_token_event, carries_tokens)
    try:
        async with session.post(
            url, json=body, timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as response:
            result.status = response.status
            if response.status != 200:
                result.error = await _http_error(response)
                return result
            decoder = SseDecoder()
            async for chunk in response.content.iter_any():
                timer.handle(decoder.feed(chunk))
            timer.handle(decoder.close())
        result.error = timer.verdict()
    except asyncio.TimeoutError:
        result.error = f"timeout after {timeout_s:g} s ({result.n_events} events received)"
    except Exception as exc:  # noqa: BLE001 - every failure becomes a failed result
        result.error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
    if result.ttft_s is not None:
        result.e2el_s = timer.most_recent_timestamp - result.start_s
    result.ok = result.error is None
    return result
