"""The KV block size of a server that does not report it, measured from cached token counts.

vLLM caches whole blocks only and looks a prompt of n tokens up to its n-1st: a repeated
prompt gets ``floor((n - 1) / B) * B`` cached tokens. Each probe sends a fresh prompt (a
private random salt, so no other request shares a block with it) twice and reads the
repeat's ``cached_tokens``; every observation (n, cached) rules out the block sizes it
contradicts. Prompts grow until the repeat hits, then each probe aims at a length that
tells the largest block size still possible apart from every smaller one. The answer is
the one block size D consistent with every observation, one of them a hit of 2 D tokens
at least (a check at another remainder); no answer (none left, or still several after
:data:`MAX_PROBES`) is a refusal, never a guess.
"""

from __future__ import annotations

import math
import secrets

from bench.engine.capabilities import cached_detail, chat_usage
from bench.errors import BenchError

#: Probe pairs at most.
MAX_PROBES = 12
#: Tokens of the first probe (about: the template's are added).
FIRST_TOKENS = 48
#: One filler unit of a probe's text (one or two tokens with common tokenisers).
_UNIT = " x"


def consistent(observations: list[tuple[int, int]]) -> list[int] | None:
    """Block sizes for which every ``(prompt_tokens, cached)`` is a full hit; ``None`` while
    no repeat has hit (then any block size above ``n - 1`` of every prompt still fits)."""
    top = max(cached for _, cached in observations)
    if top == 0:
        return None
    return [b for b in range(1, top + 1)
            if all((n - 1) // b * b == cached for n, cached in observations)]


def _next_tokens(observations: list[tuple[int, int]], candidates: list[int] | None,
                 shortest: int) -> int:
    """The prompt length the next probe aims at: double the longest while nothing hit;
    with one candidate D left, a check at two blocks and a quarter; else n - 1 = k * D + r
    for the largest candidate D, r about 3/4 D (at least D/2, at
    most D - 1) and the smallest k >= 1 that a prompt no shorter than ``shortest``
    allows. Block size D then caches k * D tokens; with k = 1 no smaller d can (it would
    have to divide D, so d <= D/2, and exceed r), so the observation keeps D alone or
    rules it out."""
    if candidates is None:
        return 2 * max(n for n, _ in observations)
    top = max(candidates)
    if len(candidates) == 1:  # the check: two blocks and a bit, another remainder
        return max(2 * top + max(1, top // 4), shortest) + 1
    rest = min(top - 1, max(math.ceil(top / 2), round(0.75 * top)))
    k = max(1, math.ceil((shortest - 1 - rest) / top))
    return k * top + rest + 1


class _Prober:
    """Fresh prompts of a chosen length, sent twice; lengths learnt from what they gave."""

    def __init__(self, base_url: str, model: str, headers: dict[str, str],
                 zero_cached_omitted: bool) -> None:
        self.base_url, self.model, self.headers = base_url, model, headers
        self.zero_cached_omitted = zero_cached_omitted
        self.sizes: list[tuple[int, int]] = []  # (filler units, prompt tokens)

    def _slope(self) -> tuple[float, int, int]:
        """Tokens per filler unit (by the last two prompts; 1 before), and the last prompt's
        units and tokens."""
        if not self.sizes:
            return 1.0, 0, 0
        (u0, n0), (u1, n1) = self.sizes[-2:] if len(self.sizes) > 1 else ((0, 0), self.sizes[0])
        return max((n1 - n0) / (u1 - u0) if u1 != u0 else 1.0, 0.1), u1, n1

    def units_for(self, tokens: int) -> int:
        """Filler units for a prompt of about ``tokens``."""
        per_unit, units, n = self._slope()
        return max(1, units + round((tokens - n) / per_unit))

    def shortest(self) -> int:
        """About the tokens of a prompt with one filler unit (the template's and the nonce's)."""
        per_unit, units, n = self._slope()
        return max(1, round(n - per_unit * (units - 1)))

    def cached(self, usage: dict) -> int:
        value = cached_detail(usage)
        if value is None and not self.zero_cached_omitted:
            raise BenchError(f"{self.base_url}: a block-size probe got no cached_tokens")
        return value or 0

    def probe(self, tokens: int) -> tuple[int, int]:
        """(prompt tokens, cached tokens of the repeat) of a fresh prompt of about ``tokens``."""
        units = self.units_for(tokens)
        text = f"[{secrets.token_hex(8)}]" + _UNIT * units
        salt = secrets.token_hex(16)
        first, repeat = (chat_usage(self.base_url, self.model, text, self.headers, salt)
                         for _ in range(2))
        n = int(repeat["prompt_tokens"])
        if self.cached(first) != 0 or int(first["prompt_tokens"]) != n:
            raise BenchError(f"{self.base_url}: a fresh prompt under a fresh salt came back "
                             "with cached tokens, or a repeat with another length")
        self.sizes.append((units, n))
        return n, self.cached(repeat)


def measure_block_size(base_url: str, model: str, headers: dict[str, str], *,
                       zero_cached_omitted: bool, max_tokens: int = 8192) -> int:
    """The server's block size from cached token counts (prompts up to ``max_tokens``);
    a BenchError that asks for ``--block-size`` when they do not tell it."""
    prober = _Prober(base_url, model, headers, zero_cached_omitted)
    observations: list[tuple[int, int]] = []
    tokens = FIRST_TOKENS
    why = f"still ambiguous after {MAX_PROBES} probes"
    for _ in range(MAX_PROBES):
        observations.append(prober.probe(tokens))
        candidates = consistent(observations)
        if candidates == []:
            why = "no block size fits the cached token counts"
            break
        if candidates is not None and len(candidates) == 1 and \
                any(cached >= 2 * candidates[0] for _, cached in observations):
            return candidates[0]
        tokens = _next_tokens(observations, candidates, prober.shortest())
        if tokens > max_tokens:
            why = (f"a repeated prompt of {max(n for n, _ in observations)} tokens got no "
                   "cached tokens (prefix caching off, or blocks larger than that)")
            break
    seen = ", ".join(f"{n} tokens -> {cached} cached" for n, cached in observations)
    raise BenchError(f"{base_url} does not report its block size and measuring it failed: "
                     f"{why} ({seen}); set --block-size")
