"""A trivial deterministic tokeniser and chat template, with media placeholders.

Text is split into words, punctuation and runs of white space, each piece one token
(``TEXT_BASE + crc32``), about as many tokens as a BPE tokeniser gives. A message is its
role token, its content and an end-of-turn token; each media item is a run of
``PLACEHOLDER_TOKENS[modality]`` copies of its modality's placeholder id. A media item's
identity (vLLM's ``mm_hash``) is its client ``uuid`` if given, else the sha256 of its URL
or inline data.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass, field

ROLE_TOKENS = {"system": 1, "developer": 1, "user": 2, "assistant": 3, "tool": 4}
END_OF_TURN = 5
PLACEHOLDER_IDS = {"image": 10, "audio": 11, "video": 12}
PLACEHOLDER_TOKENS = {"image": 16, "audio": 24, "video": 32}
TEXT_BASE = 100
#: Token ids are unsigned 64-bit in the cache's block hash.
MAX_TOKEN_ID = 2**63 - 1
#: OpenAI content-part type -> modality.
PART_MODALITY = {"image_url": "image", "audio_url": "audio", "input_audio": "audio",
                 "video_url": "video"}
_MODALITY_OF_ID = {v: k for k, v in PLACEHOLDER_IDS.items()}
_PIECES = re.compile(r"\w+|[^\w\s]|\s+")


class BadRequest(ValueError):
    """A request vLLM would refuse with HTTP 400; ``param`` names the offending field."""

    status, err_type = 400, "BadRequestError"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Media:
    """One media item's placeholder run in the prompt."""

    modality: str
    identity: str
    offset: int
    length: int


@dataclass
class Prompt:
    """Token ids as the engine sees them, with the media placeholder runs."""

    token_ids: list[int] = field(default_factory=list)
    media: list[Media] = field(default_factory=list)

    def add_media(self, modality: str, identity: str) -> None:
        length = PLACEHOLDER_TOKENS[modality]
        self.media.append(Media(modality, identity, len(self.token_ids), length))
        self.token_ids += [PLACEHOLDER_IDS[modality]] * length

    def media_tokens(self) -> dict[str, int]:
        """Placeholder tokens per modality (vLLM's ``multimodal_tokens``)."""
        out: dict[str, int] = {}
        for m in self.media:
            out[m.modality] = out.get(m.modality, 0) + m.length
        return out


def text_tokens(text: str) -> list[int]:
    """One token per word, punctuation mark or run of white space."""
    return [TEXT_BASE + zlib.crc32(piece.encode()) for piece in _PIECES.findall(text)]


def _identity(part: dict, kind: str) -> str:
    """``uuid``, else the sha256 of the media source."""
    if isinstance(part.get("uuid"), str) and part["uuid"]:
        return part["uuid"]
    source = _source(part, kind)
    if not isinstance(source, str) or not source:
        raise BadRequest(f"content part of type {kind!r} has no media", "messages")
    return hashlib.sha256(source.encode()).hexdigest()


def _source(part: dict, kind: str) -> object:
    """A chat part's ``{kind: {"url": ...}}`` (``input_audio.data``), or a flat generate
    content part's ``url``."""
    inner = part.get(kind)
    if isinstance(inner, dict):
        return inner.get("data" if kind == "input_audio" else "url")
    return part.get("url") if inner is None else inner


def _part_modality(part: object) -> str:
    if not isinstance(part, dict) or part.get("type") not in PART_MODALITY:
        kind = part.get("type") if isinstance(part, dict) else type(part).__name__
        raise BadRequest(f"unsupported content part type {kind!r}", "messages")
    return PART_MODALITY[part["type"]]


def render_chat(messages: object, add_generation_prompt: bool = True) -> Prompt:
    """The prompt of OpenAI chat ``messages`` under the template above."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    prompt = Prompt()
    for msg in messages:
        if not isinstance(msg, dict) or msg.get("role") not in ROLE_TOKENS:
            raise BadRequest(f"unsupported message {str(msg)[:80]!r}", "messages")
        prompt.token_ids.append(ROLE_TOKENS[msg["role"]])
        content = msg.get("content")
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            if isinstance(part, dict) and part.get("type") == "text":
                prompt.token_ids += text_tokens(str(part.get("text", "")))
            else:
                prompt.add_media(_part_modality(part), _identity(part, part["type"]))
        prompt.token_ids.append(END_OF_TURN)
    if add_generation_prompt:
        prompt.token_ids.append(ROLE_TOKENS["assistant"])
    return prompt


def check_token_ids(token_ids: object) -> list[int]:
    if (not isinstance(token_ids, list) or not token_ids
            or not all(isinstance(t, int) and 0 <= t <= MAX_TOKEN_ID for t in token_ids)):
        raise BadRequest("'token_ids' must be a non-empty list of non-negative integers",
                         "token_ids")
    return token_ids


def expand_parts(token_ids: list[int], parts: object) -> Prompt:
    """Expand each placeholder token of un-expanded ``token_ids`` into the run of the next
    flat content part (the ``content_parts`` form of a generate request)."""
    if not isinstance(parts, list):
        raise BadRequest("'content_parts' must be a list", "content_parts")
    prompt, queue = Prompt(), iter(parts)
    for token in token_ids:
        modality = _MODALITY_OF_ID.get(token)
        if modality is None:
            prompt.token_ids.append(token)
            continue
        part = next(queue, None)
        if part is None or _part_modality(part) != modality:
            raise BadRequest(f"{modality} placeholder without a matching content part",
                             "content_parts")
        prompt.add_media(modality, _identity(part, part["type"]))
    if next(queue, None) is not None:
        raise BadRequest("more content parts than placeholders", "content_parts")
    return prompt


def from_features(token_ids: list[int], features: object) -> Prompt:
    """Expanded ``token_ids`` with rendered ``features`` (``mm_hashes``, ``mm_placeholders``)."""
    try:
        media = [Media(modality, str(identity), int(p["offset"]), int(p["length"]))
                 for modality, hashes in features["mm_hashes"].items()  # type: ignore[index]
                 for identity, p in zip(hashes, features["mm_placeholders"][modality],  # type: ignore[index]
                                        strict=True)]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise BadRequest("'features' needs parallel mm_hashes and mm_placeholders",
                         "features") from None
    if any(m.offset < 0 or m.length <= 0 or m.offset + m.length > len(token_ids) for m in media):
        raise BadRequest("mm_placeholders must remain within the token_ids sequence", "features")
    return Prompt(list(token_ids), sorted(media, key=lambda m: m.offset))


def features(prompt: Prompt) -> dict | None:
    """The ``features`` of a rendered prompt, as vLLM's render returns them (``None``
    without media); ``kwargs_data`` holds a tiny stand-in per item, not processed tensors."""
    if not prompt.media:
        return None
    out: dict[str, dict] = {"mm_hashes": {}, "mm_placeholders": {}, "kwargs_data": {}}
    for m in prompt.media:
        out["mm_hashes"].setdefault(m.modality, []).append(m.identity)
        out["mm_placeholders"].setdefault(m.modality, []).append(
            {"offset": m.offset, "length": m.length})
        out["kwargs_data"].setdefault(m.modality, []).append(m.identity[:16])
    return {**out, "mm_metadata": None}
