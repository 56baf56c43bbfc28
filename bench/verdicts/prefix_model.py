"""A client-side model of vLLM's prefix (KV) cache, to judge every request exactly.

The engine caches full blocks of ``B`` tokens. Block ``i`` is keyed by its parent's key,
its token ids and the media spans overlapping it; ``cache_salt`` keys block 0 only and
reaches the later blocks through the chain, so blocks are shared only under the same salt
(or between unsalted requests). A source puts its ``floor(n/B)`` full blocks in the cache;
a request of ``n`` tokens hits at most its first ``floor((n-1)/B)`` blocks, and only the
leading run of those that are cached when it is scheduled.

For each request ``judge`` bounds what the server may report: ``lower`` from sources that
completed before it started (certainly cached), ``upper`` from sources that started before
its first token (possibly cached), then compares the reported count with both.

A source also caches the blocks its generated tokens fill (all but the last token have KV).
Their token ids are not known here, so they only widen ``upper``: where a request's run
of shared blocks ends at a source's last full prompt block, the blocks that source's
output completed may also hit.

A resumed run's segments are judged together, but a source guarantees hits only within
its own segment (the server may have restarted, and lost its cache, in between).

A request whose layout is unknown (its render failed, or gave another token count) is not
judged, but it may still be a source: it widens ``upper`` of every later request it can
reach (in its own cache domain, or one ``judge``'s ``reached_by`` names) to as many blocks
as its prompt and output may have filled (all of them when its length is unknown).
Requests of other domains are judged exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from bench.vocab import Judged


@dataclass(frozen=True)
class MediaSpan:
    """A multimodal item's placeholder span in the prompt."""

    offset: int  # index of the first placeholder token in the prompt
    length: int  # number of placeholder tokens
    identity: str  # the media item's identity (vLLM mm_hash, or the client uuid)


@dataclass(frozen=True)
class Layout:
    """A prompt as the engine hashes it, without its salt."""

    n_tokens: int
    block_keys: tuple[str, ...]  # one chained key per FULL block (floor(n_tokens/B)), hex, 16 chars


def layout(token_ids: Sequence[int], media: Sequence[MediaSpan], block_size: int) -> Layout:
    """Chained sha256 keys: ``key_i = sha256(key_{i-1} | block tokens | (identity, offset)
    of every media span overlapping block i)``."""
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    n_blocks = len(token_ids) // block_size
    overlapping: list[list[tuple[str, int]]] = [[] for _ in range(n_blocks)]
    for span in sorted((s for s in media if s.length > 0), key=lambda s: (s.offset, s.identity)):
        first = max(span.offset, 0) // block_size
        last = min((span.offset + span.length - 1) // block_size, n_blocks - 1)
        for i in range(first, last + 1):
            overlapping[i].append((span.identity, span.offset))
    keys: list[str] = []
    parent = ""
    for i in range(n_blocks):
        block = [int(t) for t in token_ids[i * block_size:(i + 1) * block_size]]
        payload = json.dumps([parent, block, overlapping[i]], separators=(",", ":"))
        parent = hashlib.sha256(payload.encode()).hexdigest()[:16]
        keys.append(parent)
    return Layout(n_tokens=len(token_ids), block_keys=tuple(keys))


@dataclass(frozen=True)
class Sent:
    """One request as it was sent and what came back."""

    id: int  # unique within the judged sequence (e.g. the record's seq)
    #: Which requests share a cache: a salt label or digest (None = no cache_salt); behind
    #: a router, with the replica (bench.verdicts.replicas.cache_domain).
    salt: Hashable
    layout: Layout | None  # None: unknown, not judged; a source of up to prompt_tokens
    start: float  # when the client started it (s, any common clock)
    first_token: float | None  # when its first token arrived (None if never)
    end: float | None  # when it completed successfully (None if it failed)
    cached: int | None  # cached tokens the server reported (None if failed)
    output_tokens: int = 0  # generated tokens (their full blocks are cached too)
    #: A resumed run's part (the server may have restarted in between): only sources of
    #: the same segment are guaranteed; any earlier one is still allowed.
    segment: int = 0
    #: The prompt's token count as the server reported it: how far a request of unknown
    #: layout may reach as a source (None: unknown, any length).
    prompt_tokens: int | None = None


@dataclass(frozen=True)
class Judgement:
    """What the cache model says of one request."""

    lower: int  # cached tokens guaranteed: same-salt sources completed by R.start
    upper: int  # cached tokens allowed: same-salt sources started before R's first token
    verdict: str  # bench.vocab.Judged: met, leak, under-hit, unjudged, failed, no-layout
    leaked_tokens: int  # max(cached - upper, 0)
    missing_tokens: int  # max(lower - cached, 0)
    output_tokens: int = 0  # of ``upper``: blocks an earlier request's generated tokens filled
    #: Of ``upper``: tokens beyond what known sources allow, that only a request of unknown
    #: layout may have cached.
    unknown_tokens: int = 0

    @property
    def expected(self) -> int | None:
        """The exact cached count when the bounds agree, else None."""
        return self.lower if self.lower == self.upper else None


# Per block key: the two earliest (time, request id), so that a request can skip itself.
_Keys = dict[str, list[tuple[float, int]]]
_Index = dict[Hashable, _Keys]  # per salt (and segment)


def _index(events: list[tuple[float, int, Hashable, Layout]]) -> _Index:
    """Index (time, id, group, layout) events by group (a salt) and block key, two earliest
    per key."""
    index: _Index = {}
    for time, rid, salt, lay in sorted(events, key=lambda e: (e[0], e[1])):
        keys = index.setdefault(salt, {})
        for key in lay.block_keys:
            seen = keys.get(key)
            if seen is None:
                keys[key] = [(time, rid)]
            elif len(seen) < 2:
                seen.append((time, rid))
    return index


def _run(keys: Sequence[str], begin: int, index: _Keys, rid: int, limit: float,
         inclusive: bool) -> int:
    """Length of the leading run of ``keys`` (from ``begin``) whose earliest other source
    came at or before ``limit`` (``inclusive``) or strictly before it."""
    i = begin
    for key in keys[begin:]:
        seen = index.get(key)
        if seen is None:
            break
        time, source = seen[0]
        if source == rid:
            if len(seen) < 2:
                break
            time = seen[1][0]
        if time > limit or (time == limit and not inclusive):
            break
        i += 1
    return i


_ROOT = ""  # the parent of block 0


def _decode_ends(sent: Sequence[Sent], block_size: int) -> dict[str | None, dict[str, list]]:
    """Per salt and last full prompt block key: (start, id, blocks its output filled)."""
    ends: dict[str | None, dict[str, list]] = {}
    for s in sent:
        if s.layout is None:
            continue
        full = s.layout.n_tokens // block_size
        extra = (s.layout.n_tokens + s.output_tokens - 1) // block_size - full
        if extra > 0:
            last = s.layout.block_keys[full - 1] if full else _ROOT
            ends.setdefault(s.salt, {}).setdefault(last, []).append((s.start, s.id, extra))
    return ends


def _decode_extra(keys: Sequence[str], run: int, ends: dict[str, list], rid: int,
                  limit: float) -> int:
    """Blocks past ``run`` that a source's output may have filled (0 if none)."""
    if run >= len(keys):
        return 0
    sources = ends.get(keys[run - 1] if run else _ROOT, [])
    extra = max((e for start, sid, e in sources if sid != rid and start < limit), default=0)
    return min(extra, len(keys) - run)


#: Per cache domain: starts of its requests of unknown layout (sorted), and the running
#: maximum of how many blocks they may have filled.
_Blind = dict[Hashable, tuple[list[float], list[float]]]


def _blind(sent: Iterable[Sent], block_size: int) -> _Blind:
    """Index the requests of unknown layout: how many blocks each may have filled (its
    prompt and output; any number when its length or output is unknown)."""
    events: dict[Hashable, list[tuple[float, float]]] = {}
    for s in sent:
        if s.layout is None:
            reach = (math.inf if s.prompt_tokens is None or s.end is None
                     else (s.prompt_tokens + s.output_tokens - 1) // block_size)
            events.setdefault(s.salt, []).append((s.start, reach))
    out: _Blind = {}
    for salt, items in events.items():
        items.sort()
        running, peak = [], 0.0
        for _, reach in items:
            peak = max(peak, reach)
            running.append(peak)
        out[salt] = ([start for start, _ in items], running)
    return out


def _blind_reach(index: _Blind, domains: Iterable[Hashable], limit: float) -> float:
    """The most blocks a request of unknown layout in ``domains`` that started strictly
    before ``limit`` may have filled (0 if none)."""
    reach = 0.0
    for domain in domains:
        if (found := index.get(domain)) is not None:
            starts, running = found
            if (i := bisect_left(starts, limit)) > 0:
                reach = max(reach, running[i - 1])
    return reach


def _itself(domain: Hashable) -> tuple[Hashable, ...]:
    return (domain,)


def judge(sent: Sequence[Sent], block_size: int,
          reached_by: Callable[[Hashable], Iterable[Hashable]] = _itself) -> dict[int, Judgement]:
    """Judge every request of ``sent`` (any order) against the cache its predecessors built.

    ``reached_by(domain)``: the domains whose requests of unknown layout may have cached
    blocks in ``domain`` (default: itself only).
    """
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    known = [s for s in sent if s.layout is not None]
    started = _index([(s.start, s.id, s.salt, s.layout) for s in known])
    completed = _index([(s.end, s.id, (s.salt, s.segment), s.layout) for s in known
                        if s.end is not None])
    decoded = _decode_ends(known, block_size)
    blind = _blind(sent, block_size)
    out: dict[int, Judgement] = {}
    for r in sent:
        if r.layout is None:
            verdict = Judged.NO_LAYOUT if r.end is not None else Judged.FAILED
            out[r.id] = Judgement(0, 0, verdict, 0, 0)
            continue
        keys = r.layout.block_keys[:max(r.layout.n_tokens - 1, 0) // block_size]
        cutoff = r.first_token if r.first_token is not None else r.end if r.end is not None else math.inf
        done = _run(keys, 0, completed.get((r.salt, r.segment), {}), r.id, r.start,
                    inclusive=True)
        # Whatever is guaranteed is allowed: the upper run continues the lower one.
        lower = done * block_size
        run = _run(keys, done, started.get(r.salt, {}), r.id, cutoff, inclusive=False)
        output = _decode_extra(keys, run, decoded.get(r.salt, {}), r.id, cutoff) * block_size
        known_upper = run * block_size + output
        reach = min(_blind_reach(blind, reached_by(r.salt), cutoff), len(keys))
        upper = max(known_upper, int(reach) * block_size)
        unknown = upper - known_upper
        if r.end is None or r.cached is None:
            out[r.id] = Judgement(lower, upper, Judged.FAILED, 0, 0, output, unknown)
            continue
        if r.cached > upper:
            verdict = Judged.LEAK
        elif r.cached < lower:
            verdict = Judged.UNDER_HIT
        elif lower == upper:
            verdict = Judged.MET
        else:
            verdict = Judged.UNJUDGED
        out[r.id] = Judgement(lower, upper, verdict, max(r.cached - upper, 0),
                              max(lower - r.cached, 0), output, unknown)
    return out
