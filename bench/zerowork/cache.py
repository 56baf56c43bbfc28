"""An unbounded prefix cache that keys blocks as vLLM does, and nothing else.

Block ``i`` of ``block_size`` tokens is keyed by sha256 of its parent's key, its token ids,
the identities of the media items whose placeholders overlap it and, for block 0 only,
the request's ``cache_salt``; so blocks are shared only under the same salt. A request
of ``n`` tokens hits the leading run of its first ``(n - 1) // block_size`` blocks that
are cached, then caches all ``n // block_size`` of its full blocks. Blocks filled by
generated tokens are not cached; nothing is ever evicted.
"""

from __future__ import annotations

import hashlib
from array import array

from bench.zerowork.tokens import Prompt


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(4, "little") + data


class PrefixCache:
    def __init__(self, block_size: int) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.block_size = block_size
        self._blocks: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._blocks)

    def block_keys(self, prompt: Prompt, salt: str | None) -> list[bytes]:
        """The chained keys of the prompt's full blocks."""
        size, ids = self.block_size, prompt.token_ids
        n_blocks = len(ids) // size
        extra: list[list[bytes]] = [[] for _ in range(n_blocks)]
        for m in prompt.media:
            for i in range(m.offset // size, min((m.offset + m.length - 1) // size + 1, n_blocks)):
                extra[i].append(_field(m.identity.encode()))
        if salt is not None and n_blocks:
            extra[0].append(b"salt" + _field(salt.encode()))
        keys, parent = [], b""
        for i in range(n_blocks):
            block = array("Q", ids[i * size:(i + 1) * size]).tobytes()
            parent = hashlib.sha256(parent + block + b"".join(extra[i])).digest()
            keys.append(parent)
        return keys

    def admit(self, prompt: Prompt, salt: str | None) -> int:
        """Look the prompt up, cache its full blocks, and return its cached token count."""
        keys = self.block_keys(prompt, salt)
        limit = max(len(prompt.token_ids) - 1, 0) // self.block_size
        hits = 0
        while hits < limit and keys[hits] in self._blocks:
            hits += 1
        self._blocks.update(keys)
        return hits * self.block_size
