"""``chat``: /v1/chat/completions with OpenAI content parts and ``cache_salt`` in the body."""

from __future__ import annotations

import aiohttp

from bench.paths.base import PathContext, openai_messages, with_salt
from bench.vocab import CHAT_ROUTE


class ChatPath:
    name = "chat"
    text_only = False
    accepts_uuid = True
    preprocesses_before_send = False
    routes = (CHAT_ROUTE,)
    generate_fields = ()

    def __init__(self, ctx: PathContext) -> None:
        self.ctx = ctx

    async def build(self, session: aiohttp.ClientSession, messages: list[dict],
                    max_tokens: int, salt: str | None) -> tuple[str, dict]:
        body = {
            "model": self.ctx.model,
            "messages": openai_messages(messages, self.ctx),
            "max_tokens": max_tokens, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True},
        }
        return f"{self.ctx.base_url}{CHAT_ROUTE}", with_salt(body, salt)
