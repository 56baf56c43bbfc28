"""A scriptable fake of vLLM's HTTP surface, served from its own event loop in a thread.

``POST /script`` plays the ``script`` list in its JSON body: a string is written as is,
a number sleeps that many seconds, ``"RESET"`` aborts the connection, ``{"events": n}``
writes ``n`` one-token chunk events; a leading ``{"status": s, "json"|"text": ...}``
answers with that status and body (``"content_type"``: its type) instead of a stream; a
leading ``{"hold": s}`` waits ``s`` seconds before the headers, a leading ``"RESET"``
aborts before them. ``GET /<mode>/metrics`` serves Prometheus text whose counters grow
with each scrape: ``settling`` for 3 scrapes, ``forever`` without end.
``POST /v1/chat/completions`` plays the next script of ``FakeServer.chat_plan`` if any,
else streams a fixed two-token reply with usage (100 prompt tokens, none cached);
``GET /metrics`` serves fixed counters and ``GET /health`` answers 200, enough for
saltbench's own runner to go through its motions.
"""

from __future__ import annotations

import asyncio
import json
import threading

from aiohttp import web

SCRAPES = web.AppKey("scrapes", dict)
CHAT_PLAN = web.AppKey("chat_plan", list)
TOKEN_EVENT = 'data: {"choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}\n\n'


def sse_event(event: dict) -> str:
    return f"data: {json.dumps(event)}\n\n"


def metrics_text(value: float) -> str:
    """Prometheus text as vLLM emits it (``prometheus_client.generate_latest``): two engines,
    ``_created`` gauges and an unrelated family."""
    return f"""\
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{{generation="0"}} 1234.0
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{engine="0",model_name="Qwen/Qwen2.5-VL-3B-Instruct"}} {100.0 * value}
vllm:prefix_cache_queries_total{{engine="1",model_name="Qwen/Qwen2.5-VL-3B-Instruct"}} 100.0
# HELP vllm:prefix_cache_queries_created Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_created gauge
vllm:prefix_cache_queries_created{{engine="0",model_name="Qwen/Qwen2.5-VL-3B-Instruct"}} 1.7962290643716843e+09
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{engine="0",model_name="Qwen/Qwen2.5-VL-3B-Instruct"}} {50.0 * value}
vllm:prefix_cache_hits_total{{engine="1",model_name="Qwen/Qwen2.5-VL-3B-Instruct"}} 25.0
# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_total counter
vllm:prompt_tokens_by_source_total{{engine="0",model_name="Qwen/Qwen2.5-VL-3B-Instruct",source="local_compute"}} 70.0
vllm:prompt_tokens_by_source_total{{engine="1",model_name="Qwen/Qwen2.5-VL-3B-Instruct",source="local_compute"}} 5.0
vllm:prompt_tokens_by_source_total{{engine="0",model_name="Qwen/Qwen2.5-VL-3B-Instruct",source="local_cache_hit"}} {50.0 * value}
vllm:prompt_tokens_by_source_total{{engine="0",model_name="Qwen/Qwen2.5-VL-3B-Instruct",source="external_kv_transfer"}} 0.0
# HELP vllm:prompt_tokens_by_source_created Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_created gauge
vllm:prompt_tokens_by_source_created{{engine="0",model_name="Qwen/Qwen2.5-VL-3B-Instruct",source="local_compute"}} 1.7962290643716843e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="Qwen/Qwen2.5-VL-3B-Instruct"}} {value}
vllm:request_success_total{{engine="0",finished_reason="length",model_name="Qwen/Qwen2.5-VL-3B-Instruct"}} 2.0
"""


async def _script(request: web.Request) -> web.StreamResponse:
    return await _play(request, (await request.json())["script"])


async def _play(request: web.Request, steps: list) -> web.StreamResponse:
    head = steps[0] if steps else None
    if head == "RESET":
        request.transport.abort()
        return web.Response()
    if isinstance(head, dict) and "hold" in head:
        await asyncio.sleep(head["hold"])
        steps = steps[1:]
    elif isinstance(head, dict) and "status" in head:
        if "json" in head:
            return web.json_response(head["json"], status=head["status"])
        return web.Response(text=head["text"], status=head["status"],
                            content_type=head.get("content_type", "text/plain"))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for step in steps:
        if step == "RESET":
            request.transport.abort()
            return response
        if isinstance(step, str):
            await response.write(step.encode())
        elif isinstance(step, dict):
            for _ in range(step["events"]):
                await response.write(TOKEN_EVENT.encode())
        else:
            await asyncio.sleep(step)
    await response.write_eof()
    return response


async def _metrics(request: web.Request) -> web.Response:
    scrapes = request.app[SCRAPES]
    mode = request.match_info["mode"]
    scrapes[mode] = scrapes.get(mode, 0) + 1
    value = min(scrapes[mode], 3) if mode == "settling" else scrapes[mode]
    return web.Response(text=metrics_text(value), content_type="text/plain")


CHAT_USAGE = {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102,
              "prompt_tokens_details": {"cached_tokens": 0}}


CHAT_REPLY = [TOKEN_EVENT, TOKEN_EVENT, sse_event({"choices": [], "usage": CHAT_USAGE}),
              "data: [DONE]\n\n"]


async def _chat(request: web.Request) -> web.StreamResponse:
    await request.json()
    plan = request.app[CHAT_PLAN]
    return await _play(request, plan.pop(0) if plan else CHAT_REPLY)


async def _fixed_metrics(request: web.Request) -> web.Response:
    return web.Response(text=metrics_text(1.0))


async def _health(request: web.Request) -> web.Response:
    return web.Response()


class FakeServer:
    """The fake app on 127.0.0.1 at a free port; a context manager, ``url`` its base.

    ``chat_plan``: scripts (as for ``/script``) that the next chat requests play, in turn.
    """

    def __init__(self, chat_plan: list[list] | None = None) -> None:
        self.app = web.Application()
        self.app[SCRAPES] = {}
        self.app[CHAT_PLAN] = list(chat_plan or [])
        self.app.router.add_post("/script", _script)
        self.app.router.add_get("/{mode}/metrics", _metrics)
        self.app.router.add_post("/v1/chat/completions", _chat)
        self.app.router.add_get("/metrics", _fixed_metrics)
        self.app.router.add_get("/health", _health)
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        runner = web.AppRunner(self.app, handler_cancellation=True, shutdown_timeout=0.5)
        self._loop.run_until_complete(runner.setup())
        self._loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    def __enter__(self) -> FakeServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
