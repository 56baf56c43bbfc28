"""The zero-work server's routes: vLLM's HTTP surface, answered at once.

Each request is tokenised (:mod:`bench.zerowork.tokens`), looked up in and added to the
prefix cache (:mod:`bench.zerowork.cache`) and counted (:mod:`bench.zerowork.metrics`)
before its first byte is written; so the ``cached_tokens`` it reports and the counters
agree. Nothing is logged: no access log, no request body, no ``cache_salt``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import asdict, dataclass

from aiohttp import web

from bench import aio
from bench.vocab import CHAT_ROUTE, GENERATE_ROUTE, RENDER_ROUTE
from bench.zerowork.cache import PrefixCache
from bench.zerowork.metrics import Counters
from bench.zerowork.sse import (
    DONE,
    ChatStream,
    GenerateStream,
    Usage,
    chat_response,
    generate_response,
)
from bench.zerowork.tokens import (
    BadRequest,
    Prompt,
    check_token_ids,
    expand_parts,
    features,
    from_features,
    render_chat,
)

VERSION = "0.0.0+zerowork"
DEFAULT_MODEL = "zerowork"
#: Tokens of a reply that sets no ``max_tokens`` (vLLM's default for generate).
DEFAULT_MAX_TOKENS = 16
#: vLLM's ``validate_cache_salt``.
MAX_SALT_CHARS, FORBIDDEN_SALT_CHARS = 128, frozenset("@/\\\x00")
GENERATE_FIELDS = ("request_id", "token_ids", "features", "content_parts", "sampling_params",
                   "model", "stream", "stream_options", "cache_salt", "priority",
                   "kv_transfer_params", "output_mode", "return_token_ids")
CHAT_FIELDS = ("model", "messages", "max_tokens", "max_completion_tokens", "stream",
               "stream_options", "cache_salt", "add_generation_prompt", "ignore_eos")


@dataclass(frozen=True)
class Settings:
    """How the server answers (reported under ``zerowork`` in ``/server_info``)."""

    model: str = DEFAULT_MODEL
    block_size: int = 32
    itl_ms: float = 0.0  # delay between token chunks after the first
    #: Time a request holds one of ``slots`` before its first token: a server of known
    #: capacity (``slots * 1000 / prefill_ms`` requests/s), for the capacity search's tests.
    prefill_ms: float = 0.0
    slots: int = 1
    output_tokens: int | None = None  # None: each request's max_tokens
    max_model_len: int = 8192


class UnknownModel(BadRequest):
    status, err_type = 404, "NotFoundError"


def _error(exc: BadRequest) -> web.Response:
    return web.json_response({"error": {"message": str(exc), "type": exc.err_type,
                                        "param": exc.param, "code": exc.status}},
                             status=exc.status)


@web.middleware
async def _vllm_errors(request: web.Request, handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as exc:
        return _error(exc)


def _salt(body: dict) -> str | None:
    """The request's ``cache_salt``, validated as vLLM does (never echoed in an error)."""
    salt = body.get("cache_salt")
    if salt is None:
        return None
    if not isinstance(salt, str) or not salt:
        raise BadRequest("Parameter 'cache_salt' must be a non-empty string if provided.",
                         "cache_salt")
    if len(salt) > MAX_SALT_CHARS or not FORBIDDEN_SALT_CHARS.isdisjoint(salt):
        raise BadRequest("Parameter 'cache_salt' must be at most 128 characters and must "
                         "not contain '@', '/', '\\\\', or NUL.", "cache_salt")
    return salt


def _include_usage(body: dict) -> bool:
    return bool((body.get("stream_options") or {}).get("include_usage"))


class ZeroWork:
    """The server's state (prefix cache, counters, media seen) and its handlers."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cache = PrefixCache(settings.block_size)
        self.counters = Counters()
        self.media_seen: set[str] = set()
        self.model_json = json.dumps(settings.model)
        self.slots = asyncio.Semaphore(settings.slots)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_vllm_errors], client_max_size=1 << 30)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/version", self.version)
        app.router.add_get("/server_info", self.server_info)
        app.router.add_get("/openapi.json", self.openapi)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post(CHAT_ROUTE, self.chat)
        app.router.add_post(RENDER_ROUTE, self.render)
        app.router.add_post(GENERATE_ROUTE, self.generate)
        for route in ("/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache"):
            app.router.add_post(route, self.reset)  # vLLM's, in VLLM_SERVER_DEV_MODE
        return app

    async def reset(self, request: web.Request) -> web.Response:
        """Empty the prefix cache (``/reset_prefix_cache``) or the media seen (the others)."""
        if request.path == "/reset_prefix_cache":
            self.cache = PrefixCache(self.settings.block_size)
        else:
            self.media_seen.clear()
        return web.Response()

    async def health(self, request: web.Request) -> web.Response:
        return web.Response()

    async def models(self, request: web.Request) -> web.Response:
        model = self.settings.model
        return web.json_response({"object": "list", "data": [{
            "id": model, "object": "model", "created": 0, "owned_by": "vllm", "root": model,
            "parent": None, "max_model_len": self.settings.max_model_len}]})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VERSION})

    async def server_info(self, request: web.Request) -> web.Response:
        s = self.settings
        return web.json_response({"vllm_config": {
            "model_config": {"model": s.model, "max_model_len": s.max_model_len},
            "cache_config": {"block_size": s.block_size, "enable_prefix_caching": True,
                             "prefix_caching_hash_algo": "sha256", "num_gpu_blocks": None}},
            "zerowork": asdict(s)})

    async def openapi(self, request: web.Request) -> web.Response:
        def post(schema: str) -> dict:
            return {"post": {"requestBody": {"content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{schema}"}}}}}}

        return web.json_response({
            "openapi": "3.1.0", "info": {"title": "zerowork", "version": VERSION},
            "paths": {CHAT_ROUTE: post("ChatCompletionRequest"),
                      RENDER_ROUTE: post("ChatCompletionRequest"),
                      GENERATE_ROUTE: post("GenerateRequest"),
                      **{route: {"get": {}} for route in ("/health", "/v1/models", "/version",
                                                          "/server_info", "/metrics")}},
            "components": {"schemas": {
                "GenerateRequest": {"properties": {f: {} for f in GENERATE_FIELDS}},
                "ChatCompletionRequest": {"properties": {f: {} for f in CHAT_FIELDS}}}}})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.counters.exposition(self.settings.model),
                            content_type="text/plain", charset="utf-8")

    async def _body(self, request: web.Request) -> dict:
        """The JSON object of a POST, for the served model (or none named)."""
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            raise BadRequest(f"JSON decode error: {exc}") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != self.settings.model:
            raise UnknownModel(f"The model `{model}` does not exist.", "model")
        return body

    def _output_tokens(self, requested: object) -> int:
        if requested is not None and (not isinstance(requested, int) or requested < 1):
            raise BadRequest("max_tokens must be at least 1", "max_tokens")
        return self.settings.output_tokens or requested or DEFAULT_MAX_TOKENS

    def _query_media(self, prompt: Prompt) -> None:
        """The multimodal processor cache: one query per raw media item, a hit if seen."""
        for m in prompt.media:
            self.counters.mm_cache_queries += 1
            if m.identity in self.media_seen:
                self.counters.mm_cache_hits += 1
            self.media_seen.add(m.identity)

    def _admit(self, prompt: Prompt, salt: str | None, n_out: int,
               media_tokens: dict[str, int] | None = None) -> Usage:
        cached = self.cache.admit(prompt, salt)
        self.counters.admitted(len(prompt.token_ids), cached)
        return Usage(len(prompt.token_ids), n_out, cached, media_tokens)

    async def _stream(self, request: web.Request, stream: ChatStream | GenerateStream,
                      n_out: int, usage: Usage | None) -> web.StreamResponse:
        """Write the stream: the opening and first token at once, each later token after
        ``itl_ms`` (all in one write when it is 0), then usage and ``[DONE]``."""
        if self.settings.prefill_ms:
            async with self.slots:
                await asyncio.sleep(self.settings.prefill_ms / 1e3)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await response.prepare(request)
        middle, last = stream.token(False), stream.token(True)
        tokens = [middle] * (n_out - 1) + [last]
        closing = (stream.usage(usage) if usage is not None else b"") + DONE
        delay = self.settings.itl_ms / 1e3
        if delay:
            await response.write(stream.opening() + tokens[0])
            for chunk in tokens[1:]:
                await asyncio.sleep(delay)
                await response.write(chunk)
            self.counters.finished(n_out)
            await response.write(closing)
        else:
            self.counters.finished(n_out)
            await response.write(stream.opening() + b"".join(tokens) + closing)
        await response.write_eof()
        return response

    async def _chat_request(self, request: web.Request) -> tuple[dict, str | None, Prompt, int]:
        """A chat or render request: its body, salt, prompt and output token count."""
        body = await self._body(request)
        prompt = render_chat(body.get("messages"), body.get("add_generation_prompt", True))
        n_out = self._output_tokens(body.get("max_completion_tokens", body.get("max_tokens")))
        return body, _salt(body), prompt, n_out

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body, salt, prompt, n_out = await self._chat_request(request)
        self._query_media(prompt)
        usage = self._admit(prompt, salt, n_out, prompt.media_tokens())
        if not body.get("stream"):
            self.counters.finished(n_out)
            return web.json_response(chat_response(self.settings.model, n_out, usage))
        return await self._stream(request, ChatStream(self.model_json), n_out,
                                  usage if _include_usage(body) else None)

    async def render(self, request: web.Request) -> web.Response:
        """The prompt as a generate request (vLLM's ``GenerateRequest``); no cache lookup."""
        _, salt, prompt, n_out = await self._chat_request(request)
        return web.json_response({
            "request_id": uuid.uuid4().hex, "token_ids": prompt.token_ids,
            "features": features(prompt), "content_parts": None,
            "sampling_params": {"max_tokens": n_out}, "model": self.settings.model,
            "stream": False, "stream_options": None, "cache_salt": salt, "priority": 0,
            "output_mode": "tokens"})

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        salt = _salt(body)
        token_ids = check_token_ids(body.get("token_ids"))
        params = body.get("sampling_params")
        if not isinstance(params, dict):
            raise BadRequest("'sampling_params' is required", "sampling_params")
        parts, feats = body.get("content_parts"), body.get("features")
        if parts and feats:
            raise BadRequest("content_parts and features are mutually exclusive")
        if parts:
            prompt = expand_parts(token_ids, parts)
            self._query_media(prompt)
        else:
            prompt = from_features(token_ids, feats) if feats else Prompt(token_ids)
        n_out = self._output_tokens(params.get("max_tokens"))
        usage = self._admit(prompt, salt, n_out)
        request_id = str(body.get("request_id") or uuid.uuid4().hex)
        if not body.get("stream"):
            self.counters.finished(n_out)
            return web.json_response(generate_response(request_id, self.settings.model, n_out,
                                                       usage))
        return await self._stream(request, GenerateStream(request_id), n_out,
                                  usage if _include_usage(body) else None)


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until SIGINT or SIGTERM, on uvloop when it is installed."""
    loop = aio.new_loop()
    web.run_app(ZeroWork(settings).app(), host=host, port=port, access_log=None, print=None,
                backlog=1024, shutdown_timeout=1.0, loop=loop)
