"""Probe prompts: a fresh nonce first, then text, then at most one media item, then
optionally a trailing text."""

from __future__ import annotations

import secrets

from bench.salts import digest

#: Enough text that a text-only prompt spans several KV blocks on its own.
FILLER = ("Cache isolation probe. Each tenant's prefix blocks must stay its own; "
          "a salted request never reuses blocks cached under another salt. ") * 2


def nonce() -> str:
    return secrets.token_hex(4)


def prompt(modality: str, media_id: str | None = None, uuid: str | None = None,
           tag: str | None = None, trailing: str | None = None) -> list[dict]:
    """One user message; ``tag`` (default: a fresh nonce) leads, inside the first block;
    ``trailing`` is a text part after the media."""
    parts: list[dict] = [{"type": "text", "text": f"[{tag or nonce()}] {FILLER}"}]
    if modality != "text":
        part = {"type": modality, "media": media_id}
        if uuid is not None:
            part["uuid"] = uuid
        parts.append(part)
    if trailing is not None:
        parts.append({"type": "text", "text": trailing})
    return [{"role": "user", "content": parts}]


def tenant_uuid(salt: str | None, key: str) -> str:
    """``key`` (an item's id or client uuid) namespaced by its tenant: the salt's digest,
    never the salt; unsalted requests share the ``none`` namespace."""
    return f"tenant-{digest(salt) or 'none'}-{key}"
