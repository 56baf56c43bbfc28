"""What every request path shares: the logical request in OpenAI message form, the
salt in the body, and how a stream's events and usage are read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import aiohttp

from bench.errors import BenchError
from bench.paths.media_urls import MediaUrls
from bench.vocab import RENDER_ROUTE
from bench.workload import MediaItem


class RequestPath(Protocol):
    """One way into vLLM. Capabilities are class attributes, read by the experiments."""

    name: ClassVar[str]
    #: Sends the request's text only (its media are dropped).
    text_only: ClassVar[bool]
    #: Forwards a client ``uuid`` per media item (which replaces the content hash).
    accepts_uuid: ClassVar[bool]
    #: Its media are preprocessed while the request is built, before the timed send
    #: (so TTFT leaves that time out; ``ttft_incl_preprocess_ms`` adds it back).
    preprocesses_before_send: ClassVar[bool]
    #: Server routes it needs (bench.vocab); a server without one cannot serve the path.
    routes: ClassVar[tuple[str, ...]]
    #: Fields of a generate request it needs the server to know (an unknown one is ignored).
    generate_fields: ClassVar[tuple[str, ...]]
    ctx: PathContext

    async def build(self, session: aiohttp.ClientSession, messages: list[dict],
                    max_tokens: int, salt: str | None) -> tuple[str, dict]:
        """The URL and JSON body of one streamed request."""
        ...


#: OpenAI chat content-part type per modality.
PART_TYPES = {"image": "image_url", "audio": "audio_url", "video": "video_url"}


@dataclass
class PathContext:
    """Everything a path needs besides the request itself."""

    base_url: str
    model: str
    media: dict[str, MediaItem]
    urls: MediaUrls
    audio_part: str = "audio_url"  # or "input_audio" (base64 WAV in the body)
    timeout_s: float = 600.0
    #: The server leaves ``cached_tokens`` out when it is 0 (bench.engine.capabilities).
    zero_cached_omitted: bool = False


def media_modalities(req: dict) -> list[str]:
    """Modalities of the request's media parts, in prompt order."""
    return [p["type"] for m in req["messages"] for p in m["content"] if p["type"] != "text"]


def modality_label(modalities: list[str]) -> str:
    """``text``, the one modality, or ``mixed``."""
    kinds = set(modalities)
    return "text" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def tagged(req: dict, tag: str) -> list[dict]:
    """The request's messages with ``[tag] `` before its first text (a per-pass nonce).

    The workload starts each case with its own nonce; the tag keeps two passes (or two
    runs against the same server) from sharing cache keys.
    """
    messages = [{"role": m["role"], "content": list(m["content"])} for m in req["messages"]]
    first = messages[0]["content"]
    for i, part in enumerate(first):
        if part["type"] == "text":
            first[i] = {"type": "text", "text": f"[{tag}] {part['text']}"}
            return messages
    first.insert(0, {"type": "text", "text": f"[{tag}]"})
    return messages


def text_only(messages: list[dict]) -> list[dict]:
    """The messages without their media parts (what the token-only path sends)."""
    return [{"role": m["role"], "content": [p for p in m["content"] if p["type"] == "text"]}
            for m in messages]


def openai_messages(messages: list[dict], ctx: PathContext, *,
                    standins: dict | None = None) -> list[dict]:
    """Manifest messages as OpenAI chat messages with content parts.

    ``standins`` replaces each media file by a tiny one of its modality (to render the
    prompt template without touching the real media).
    """
    return [{"role": msg["role"], "content": [
        {"type": "text", "text": part["text"]} if part["type"] == "text"
        else media_part(part["type"], part["media"], ctx, standins, part.get("uuid"))
        for part in msg["content"]]} for msg in messages]


def media_url(media_id: str, ctx: PathContext) -> str:
    """The URL of one of the workload's media files."""
    try:
        item = ctx.media[media_id]
    except KeyError:
        raise BenchError(f"media {media_id!r}: not in the workload's media index") from None
    return ctx.urls.url(item.path, item.mime)


def media_part(kind: str, media_id: str, ctx: PathContext, standins: dict | None = None,
               uuid: str | None = None) -> dict:
    """An OpenAI content part; ``uuid`` (vLLM extension) replaces the media's content hash."""
    url = standins[kind] if standins is not None else media_url(media_id, ctx)
    if kind == "audio" and ctx.audio_part == "input_audio":
        if not url.startswith("data:"):
            raise BenchError("--audio-part input_audio needs --media-url data")
        part = {"type": "input_audio", "input_audio": {"data": url.split(",", 1)[1], "format": "wav"}}
    else:
        part = {"type": PART_TYPES[kind], PART_TYPES[kind]: {"url": url}}
    if uuid is not None and standins is None:
        part["uuid"] = uuid
    return part


def with_salt(body: dict, salt: str | None) -> dict:
    if salt is not None:
        body["cache_salt"] = salt
    return body


def is_token_event(event: dict) -> int:
    """vLLM's benchmark rule: any chunk with non-empty ``choices`` carries output."""
    return len(event.get("choices") or [])


def carries_tokens(event: dict) -> bool:
    """Whether a chunk carries generated output: chat ``delta`` text, or generate's
    ``token_ids`` / ``text`` (not chat's role-only first chunk, not the usage chunk)."""
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        if (choice.get("token_ids") or choice.get("text") or delta.get("content")
                or delta.get("reasoning_content") or delta.get("reasoning")):
            return True
    return False


def usage_counts(usage: dict | None, zero_cached_omitted: bool = False) -> dict[str, Any]:
    """Prompt, cached and output token counts from a final ``usage`` object; a missing
    ``cached_tokens`` reads as 0 from a server known to leave zeros out."""
    usage = usage or {}
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    if cached is None and zero_cached_omitted and usage.get("prompt_tokens") is not None:
        cached = 0
    return {"prompt_tokens": usage.get("prompt_tokens"), "cached_tokens": cached,
            "output_tokens": usage.get("completion_tokens")}


async def render(session: aiohttp.ClientSession, ctx: PathContext, messages: list[dict],
                 salt: str | None = None) -> dict:
    """The server's rendering of OpenAI ``messages``: token ids and, with media, features
    (``mm_hashes``, ``mm_placeholders``, processed ``kwargs_data``)."""
    url = f"{ctx.base_url}{RENDER_ROUTE}"
    body = with_salt({"model": ctx.model, "messages": messages, "add_generation_prompt": True},
                     salt)
    async with session.post(url, json=body,
                            timeout=aiohttp.ClientTimeout(total=ctx.timeout_s)) as r:
        if r.status != 200:
            raise BenchError(f"POST {url}: HTTP {r.status}: {(await r.text())[:500]}")
        rendered = await r.json()
    if not isinstance(rendered, dict) or "token_ids" not in rendered:
        raise BenchError(f"render returned no token_ids: {str(rendered)[:200]}")
    return rendered
