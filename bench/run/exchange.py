"""One request on one path: build it, stream it, and measure it."""

from __future__ import annotations

import time

import aiohttp

from bench.client.stream import CONNECT_TIMEOUT_S, MAX_ERROR_CHARS, post_stream
from bench.measured.records import Exchange
from bench.paths.base import RequestPath, carries_tokens, is_token_event, usage_counts
from bench.salts import digest
from bench.vocab import Failure


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 3)


def _scrub(error: str | None, salt: str | None) -> str | None:
    """A server may echo the request: never let a raw salt reach a record."""
    return error.replace(salt, f"<salt {digest(salt)}>") if error and salt else error


def failed_exchange(failure: str, error: str, *, build_ms: float | None = None) -> Exchange:
    """The outcome of a request that failed before any reply: ``failure`` (a
    :data:`bench.vocab.FAILURES` kind) and ``error``, nothing measured."""
    return Exchange(ok=False, status=None, failure=failure, error=error, prompt_tokens=None,
                    cached_tokens=None, output_tokens=None, build_ms=build_ms, ttft_ms=None,
                    ttft_incl_preprocess_ms=None, e2el_ms=None, itl_ms=[], itl_token_ms=[])


async def exchange(session: aiohttp.ClientSession, path: RequestPath, messages: list[dict],
                   max_tokens: int, salt: str | None, timeout_s: float, *,
                   connect_timeout_s: float = CONNECT_TIMEOUT_S,
                   first_byte_timeout_s: float | None = None) -> Exchange:
    """The measured outcome of one request; failures (build or stream) are not raised.

    The timeouts are :func:`bench.client.stream.post_stream`'s.

    ``build_ms`` is the time to build the request before it is sent (for a path that
    preprocesses media then, the render call); ``ttft_incl_preprocess_ms`` adds it to TTFT
    for such a path, so that every path's figure includes media preprocessing.
    """
    started = time.perf_counter()
    try:
        url, body = await path.build(session, messages, max_tokens, salt)
    except Exception as exc:  # noqa: BLE001 - a request that cannot be built is a failure
        error = f"build: {type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        return failed_exchange(Failure.BUILD, _scrub(error, salt),
                               build_ms=_ms(time.perf_counter() - started))
    build_s = time.perf_counter() - started
    result = await post_stream(url, body, timeout_s=timeout_s,
                               connect_timeout_s=connect_timeout_s,
                               first_byte_timeout_s=first_byte_timeout_s,
                               is_token_event=is_token_event, carries_tokens=carries_tokens)
    counts = usage_counts(result.usage, path.ctx.zero_cached_omitted)
    ok, failure, error = result.ok, result.failure, result.error
    if ok and (counts["prompt_tokens"] is None or counts["cached_tokens"] is None):
        ok, failure, error = False, Failure.NO_USAGE, (
            "the final usage chunk has no prompt_tokens_details.cached_tokens: "
            "start vLLM with --enable-prompt-tokens-details")
    preprocess_s = build_s if path.preprocesses_before_send else 0.0
    return Exchange(ok=ok, status=result.status, failure=failure, error=_scrub(error, salt),
                    **counts,
                    build_ms=_ms(build_s), ttft_ms=_ms(result.ttft_s),
                    ttft_incl_preprocess_ms=_ms(None if result.ttft_s is None
                                                else result.ttft_s + preprocess_s),
                    e2el_ms=_ms(result.e2el_s), itl_ms=[round(x * 1e3, 3) for x in result.itl_s],
                    itl_token_ms=[round(x * 1e3, 3) for x in result.token_itl_s])
