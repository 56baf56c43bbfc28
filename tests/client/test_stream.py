import asyncio

from fakeserver import TOKEN_EVENT, sse_event

from bench.client.connections import streaming
from bench.client.stream import SseDecoder, StreamResult, post_stream

DONE = "data: [DONE]\n\n"
USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 8}}


def is_token_event(event: dict) -> int:
    choices = event.get("choices") or []
    return sum(1 for c in choices if c.get("delta", {}).get("content"))


def run(fake_server, script: list, timeout_s: float = 5.0) -> StreamResult:
    async def go() -> StreamResult:
        async with streaming():
            return await post_stream(
                fake_server.url + "/script",
                {"script": script},
                is_token_event=is_token_event,
                timeout_s=timeout_s,
            )

    return asyncio.run(go())


def test_well_formed_stream_timings(fake_server):
    role = sse_event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    usage = sse_event({"choices": [], "usage": USAGE})
    script = [0.05, role, 0.02, TOKEN_EVENT, 0.02, TOKEN_EVENT, 0.02, TOKEN_EVENT, 0.05, usage, 0.05, DONE]
    result = run(fake_server, script)
    assert result.ok, result.error
    assert result.status == 200 and result.error is None
    assert result.n_events == 5
    assert len(result.itl_s) == 2  # three token events: one TTFT, two gaps
    assert 0 < result.ttft_s < result.e2el_s
    assert all(gap > 0 for gap in result.itl_s)
    # E2EL ends at the last token event, as in vLLM: TTFT + gaps, not the usage chunk.
    assert abs(result.ttft_s + sum(result.itl_s) - result.e2el_s) < 1e-9
    assert result.usage == USAGE
    assert result.start_s > 0


def test_usage_taken_from_last_non_null(fake_server):
    first = sse_event({"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": 1}})
    final = sse_event({"choices": [], "usage": USAGE})
    result = run(fake_server, [first, TOKEN_EVENT, final, TOKEN_EVENT, DONE])
    assert result.ok and result.usage == USAGE


def test_error_event_in_200_stream(fake_server):
    error = {"error": {"message": "Internal fake_server error", "type": "InternalServerError", "code": 500}}
    result = run(fake_server, [TOKEN_EVENT, sse_event(error), DONE])
    assert not result.ok and result.status == 200
    assert result.error == "error event: Internal fake_server error"


def test_http_400_json_body(fake_server):
    body = {"error": {"message": "max_tokens is too large", "type": "BadRequestError", "code": 400}}
    result = run(fake_server, [{"status": 400, "json": body}])
    assert not result.ok and result.status == 400
    assert result.error == "HTTP 400: max_tokens is too large"
    assert result.n_events == 0 and result.ttft_s is None and result.e2el_s is None


def test_http_500_text_body_truncated(fake_server):
    result = run(fake_server, [{"status": 500, "text": "boom " + "x" * 2000}])
    assert not result.ok and result.status == 500
    assert result.error.startswith("HTTP 500: boom x")
    assert len(result.error) <= len("HTTP 500: ") + 500


def test_malformed_json_event(fake_server):
    result = run(fake_server, [TOKEN_EVENT, 'data: {"choices": [\n\n', DONE])
    assert not result.ok
    assert "malformed JSON in event 2" in result.error


def test_connection_reset_mid_stream(fake_server):
    result = run(fake_server, [TOKEN_EVENT, TOKEN_EVENT, 0.02, "RESET"])
    assert not result.ok
    assert result.error.startswith("the server closed the connection mid-reply")
    assert result.n_events == 2 and result.ttft_s is not None


def test_stream_without_done(fake_server):
    result = run(fake_server, [TOKEN_EVENT, TOKEN_EVENT])
    assert not result.ok
    assert result.error == "stream ended without [DONE] after 2 events"
    assert result.e2el_s is not None


def test_no_token_event_fails_like_vllm(fake_server):
    result = run(fake_server, [sse_event({"choices": [], "usage": USAGE}), DONE])
    assert not result.ok and result.usage == USAGE
    assert "no token event" in result.error


def test_slow_response_times_out(fake_server):
    result = run(fake_server, [TOKEN_EVENT, 5.0, DONE], timeout_s=0.3)
    assert not result.ok
    assert result.error.startswith("timeout after 0.3 s")


def test_crlf_and_comment_lines(fake_server):
    token = TOKEN_EVENT.replace("\n", "\r\n")
    script = [": ping\r\n\r\n", token, ": keep-alive\r\n", token[:20], 0.02, token[20:],
              "data: [DONE]\r\n\r\n"]
    result = run(fake_server, script)
    assert result.ok, result.error
    assert result.n_events == 2 and len(result.itl_s) == 1


def test_cancellation_propagates(fake_server):
    async def go() -> None:
        async with streaming():
            task = asyncio.create_task(
                post_stream(
                    fake_server.url + "/script",
                    {"script": [5.0, DONE]},
                    is_token_event=is_token_event,
                    timeout_s=10,
                )
            )
            await asyncio.sleep(0.1)
            task.cancel()
            await task

    try:
        asyncio.run(go())
    except asyncio.CancelledError:
        return
    raise AssertionError("cancellation was swallowed")


def test_decoder_splits_across_chunks_and_joins_data_lines():
    decoder = SseDecoder()
    text = "event: x\ndata: a\ndata: b\n\nid: 1\n\n: c\n\ndata:[DONE]\r\n"
    payloads = [p for i in range(len(text)) for p in decoder.feed(text[i].encode())]
    payloads += decoder.close()
    assert payloads == ["a\nb", "[DONE]"]


def test_decoder_multibyte_utf8_split():
    decoder = SseDecoder()
    raw = 'data: {"t":"é"}\n\n'.encode()
    cut = raw.index(b"\xc3") + 1
    assert decoder.feed(raw[:cut]) == [] and decoder.feed(raw[cut:]) == ['{"t":"é"}']
