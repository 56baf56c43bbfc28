"""Salt handling: raw salts are derived at run time and never written anywhere.

Only :func:`digest` of a salt may appear in logs, records and reports.
"""

from __future__ import annotations

import hashlib
import hmac


def digest(salt: str | None) -> str | None:
    """A short, stable, non-reversible label for a salt (``None`` stays ``None``)."""
    if salt is None:
        return None
    return hashlib.sha256(salt.encode()).hexdigest()[:10]


def derive(secret: str, ref: str) -> str:
    """The raw salt for a salt reference (e.g. a tenant name) under a run secret.

    The result is valid for vLLM: 32 hex characters, none of ``@ / \\ NUL``.
    """
    return hmac.new(secret.encode(), ref.encode(), hashlib.sha256).hexdigest()[:32]
