"""What a running server does, found out by asking it once (not by trusting its version).

Some vLLM response builders set ``usage.prompt_tokens_details`` only when cached tokens
are above 0: a missing field then means 0, but only on a server known to report it
when it is not 0. Two identical requests tell: the repeat must show cached tokens.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request

from bench.errors import BenchError

#: How a server reports ``prompt_tokens_details.cached_tokens``.
ALWAYS, WHEN_NONZERO, NEVER = "always", "when-nonzero", "never"

#: Long enough for a few full KV blocks of any block size up to 128 tokens.
_PROBE_TEXT = "saltbench probe of prompt token details. " * 12


def chat_usage(base_url: str, model: str, text: str, headers: dict[str, str],
               salt: str | None = None) -> dict:
    """``usage`` of a one-token chat completion of ``text`` (with ``salt`` as its
    ``cache_salt``); a BenchError naming the server if it fails."""
    body = {"model": model, "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "user", "content": text}]}
    if salt is not None:
        body["cache_salt"] = salt
    request = urllib.request.Request(f"{base_url}/v1/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=120) as resp:
            return json.loads(resp.read()).get("usage") or {}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise BenchError(f"{base_url}: a probe request failed ({exc})") from None


def cached_detail(usage: dict) -> int | None:
    """``prompt_tokens_details.cached_tokens`` of a ``usage``, ``None`` when left out."""
    return (usage.get("prompt_tokens_details") or {}).get("cached_tokens")


def cached_tokens_reporting(base_url: str, model: str, headers: dict[str, str]) -> str:
    """``always``, ``when-nonzero`` (a missing field means 0) or ``never``; ``headers``
    carry the API key."""
    text = f"[{secrets.token_hex(6)}] {_PROBE_TEXT}"  # a prefix no other request has
    first, repeat = (cached_detail(chat_usage(base_url, model, text, headers))
                     for _ in range(2))
    if repeat is None:
        return NEVER
    return ALWAYS if first is not None else WHEN_NONZERO
