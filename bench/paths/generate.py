"""The three forms of /inference/v1/generate (token in, token out).

- ``generate-tokens``: plain token ids of the request's text-only form.
- ``generate-parts``: token ids with ONE un-expanded placeholder per media item, plus
  flat ``content_parts`` (the server expands each placeholder).
- ``generate-features``: what /v1/chat/completions/render returns (expanded ids and
  pre-processed features), posted unchanged.
Token ids come from the server's own renderer. For ``generate-parts`` the prompt is
rendered with tiny stand-in media, then each placeholder run is collapsed to one token:
the un-expanded ids do not depend on the media, and the real media never reach the
server before the timed request.
"""

from __future__ import annotations

import aiohttp

from bench.paths.base import (
    PART_TYPES,
    PathContext,
    media_url,
    openai_messages,
    render,
    text_only,
    with_salt,
)
from bench.paths.media_urls import standins
from bench.vocab import GENERATE_ROUTE, RENDER_ROUTE


def collapse_placeholders(token_ids: list[int], placeholders: dict) -> list[int]:
    """Replace each expanded placeholder run ``(offset, length)`` by its first token."""
    runs = sorted((p["offset"], p["length"]) for items in placeholders.values() for p in items)
    out, pos = [], 0
    for offset, length in runs:
        out += token_ids[pos:offset + 1]
        pos = offset + length
    return out + token_ids[pos:]


class _GeneratePath:
    name = ""
    text_only = False
    accepts_uuid = False
    preprocesses_before_send = False
    routes = (GENERATE_ROUTE, RENDER_ROUTE)  # token ids come from the server's renderer
    generate_fields: tuple[str, ...] = ("token_ids",)

    def __init__(self, ctx: PathContext) -> None:
        self.ctx = ctx
        self.url = f"{ctx.base_url}{GENERATE_ROUTE}"

    def generate_body(self, token_ids: list[int], max_tokens: int, salt: str | None,
                      **extra: object) -> dict:
        body = {"model": self.ctx.model, "token_ids": token_ids,
                "sampling_params": {"max_tokens": max_tokens, "ignore_eos": True},
                "stream": True, "stream_options": {"include_usage": True}, **extra}
        return with_salt(body, salt)


class TokensPath(_GeneratePath):
    name = "generate-tokens"
    text_only = True

    async def build(self, session: aiohttp.ClientSession, messages: list[dict],
                    max_tokens: int, salt: str | None) -> tuple[str, dict]:
        rendered = await render(session, self.ctx,
                                openai_messages(text_only(messages), self.ctx))
        return self.url, self.generate_body(rendered["token_ids"], max_tokens, salt)


class PartsPath(_GeneratePath):
    name = "generate-parts"
    generate_fields = ("token_ids", "content_parts")
    accepts_uuid = True

    async def build(self, session: aiohttp.ClientSession, messages: list[dict],
                    max_tokens: int, salt: str | None) -> tuple[str, dict]:
        rendered = await render(session, self.ctx,
                                openai_messages(messages, self.ctx, standins=standins()))
        placeholders = (rendered.get("features") or {}).get("mm_placeholders") or {}
        token_ids = collapse_placeholders(rendered["token_ids"], placeholders)
        parts = []
        for msg in messages:
            for part in msg["content"]:
                if part["type"] != "text":
                    flat = {"type": PART_TYPES[part["type"]],
                            "url": media_url(part["media"], self.ctx)}
                    if "uuid" in part:
                        flat["uuid"] = part["uuid"]
                    parts.append(flat)
        return self.url, self.generate_body(token_ids, max_tokens, salt, content_parts=parts)


class FeaturesPath(_GeneratePath):
    name = "generate-features"
    generate_fields = ("token_ids", "features")
    preprocesses_before_send = True  # the render call processes the media

    async def build(self, session: aiohttp.ClientSession, messages: list[dict],
                    max_tokens: int, salt: str | None) -> tuple[str, dict]:
        rendered = await render(session, self.ctx, openai_messages(messages, self.ctx), salt)
        body = {k: v for k, v in rendered.items() if v is not None and k != "request_id"}
        body.update(self.generate_body(rendered["token_ids"], max_tokens, salt))
        return self.url, body
