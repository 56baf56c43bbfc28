"""The engine behind one small interface: a :class:`Target` is a base URL plus metadata.

A target is either a server saltbench starts (:mod:`bench.engine.setup`), one already
running (``--server-url``), which saltbench never manages, or a router in front of several
replicas (:mod:`bench.engine.replicas`); :func:`bench.engine.open.open_target` opens one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Replica:
    """One vLLM server behind a router."""

    name: str  # r0, r1, ... in the order given
    url: str
    managed: bool  # started by saltbench (else a running server it only uses)


@dataclass(frozen=True)
class Target:
    """Where requests go, and what every result must record about it."""

    base_url: str
    model: str
    block_size: int
    media_dir: Path | None  # served to the engine as file:// URLs, when known
    metadata: dict
    #: The server leaves ``cached_tokens`` out when it is 0 (probed once per server).
    zero_cached_omitted: bool = False
    #: Sent as ``Authorization: Bearer``; never in metadata, records or logs.
    api_key: str | None = field(default=None, repr=False)
    #: The vLLM servers behind ``base_url`` when it is a router (empty: it is the server).
    replicas: tuple[Replica, ...] = ()

    @property
    def servers(self) -> dict[str, str]:
        """Every vLLM server whose counters count, by name (``""``: the one server)."""
        return {r.name: r.url for r in self.replicas} or {"": self.base_url}

    @property
    def headers(self) -> dict[str, str]:
        """Headers every request to the server carries (the API key, if any)."""
        return auth_headers(self.api_key)


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The header that carries an API key as vLLM expects it (none without a key)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
