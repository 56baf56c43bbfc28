"""Every request judged by the prefix-cache model: what it may and must get from the cache.

For each pass, the records of its ``prime`` and ``measure`` phases and the layouts the
server rendered for them go through :func:`bench.verdicts.prefix_model.judge`, which
bounds each request's cached tokens by what completed (guaranteed) and what had started
(allowed) under the same salt before it. A request without a layout (render failed or gave
another token count, or behind a router no replica claims it) is counted ``no-layout``
and only widens the bounds of the requests it may have supplied. Each record is annotated
in memory with its ``judgement`` and bounds; the summary counts them per path x modality
x salt mode, and why unjudged requests are unjudged. Leaked tokens (above what is allowed)
and missing tokens (below what is guaranteed) are summed apart, never netted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable

from bench.measured.records import LayoutLine, Record
from bench.paths import media_paths
from bench.verdicts import prefix_model as pm
from bench.vocab import FULL, JUDGEMENTS, MEASURE, NONE, PARTIAL, Judged

#: Requests whose problems are listed in full in the results.
MAX_LISTED = 200
#: Oracle disagreements listed in full.
MAX_DISAGREEMENTS = 50
#: What the results list of each of those requests.
PROBLEM_FIELDS = ("seq", "phase", "pass", "path", "salt_mode", "request_id", "modality",
                  "replica", "judgement", "prompt_tokens", "cached_tokens", "cached_lower",
                  "cached_upper")
#: The counts of judged requests, in order. ``unjudged`` splits into
#: ``unjudged_output_blocks`` (only blocks an earlier request's output filled may match:
#: their token ids are not recorded), ``unjudged_unknown_source`` (a request of unknown
#: layout may have supplied blocks) and the rest (a source was in flight).
COUNT_KEYS = ("requests", "judged", *JUDGEMENTS, "unjudged_output_blocks",
              "unjudged_unknown_source", "leaked_tokens", "missing_tokens")


def full_hit_tokens(prompt_tokens: int, block_size: int) -> int:
    """Cached tokens of an identical repeat: whole blocks of the first n-1 tokens."""
    return max(prompt_tokens - 1, 0) // block_size * block_size


def behind_router(record: Record) -> bool:
    """Whether the record comes from a run behind a router (it names a replica, or None)."""
    return "replica" in record


def cache_domain(record: Record) -> Hashable:
    """Which requests can share cached blocks with this one: the same salt (behind a
    router, on the same replica: each has its own cache)."""
    if behind_router(record):
        return (record["salt_digest"], record["replica"])
    return record["salt_digest"]


def reached_by(domain: Hashable) -> tuple[Hashable, ...]:
    """The cache domains whose requests of unknown layout may have cached blocks in
    ``domain``: itself and, behind a router, the same salt's requests that no replica
    claims (they may have been served anywhere)."""
    if isinstance(domain, tuple):
        return (domain, (domain[0], None))
    return (domain,)


def layouts_by_request(lines: Iterable[LayoutLine]) -> dict[str, pm.Layout | None]:
    """One pass's rendered layouts by request id (None where the render failed)."""
    return {line["request_id"]: pm.Layout(line["n_tokens"], tuple(line["block_keys"]))
            if "block_keys" in line else None for line in lines}


def to_sent(record: Record, layout: pm.Layout | None) -> pm.Sent:
    """The cache model's view of a record and its rendered layout (none: unknown, as for a
    request behind a router that no replica claims, or one rendered to another length)."""
    if layout is not None and record["ok"] and layout.n_tokens != record["prompt_tokens"]:
        layout = None
    if behind_router(record) and record["replica"] is None:
        layout = None
    first = None
    if record.get("ttft_ms") is not None:
        first = record["start_s"] + ((record.get("build_ms") or 0) + record["ttft_ms"]) / 1e3
    return pm.Sent(id=record["seq"], salt=cache_domain(record), layout=layout,
                   start=record["start_s"], first_token=first,
                   end=record["end_s"] if record["ok"] else None,
                   cached=record["cached_tokens"] if record["ok"] else None,
                   output_tokens=(record.get("output_tokens") or 0) if record["ok"] else 0,
                   segment=record.get("segment", 0),
                   prompt_tokens=record.get("prompt_tokens") if record["ok"] else None)


class Judgements:
    """The run's judgement, built a pass at a time and a record at a time: for each pass,
    :meth:`judge` the cache model's view of its requests, then :meth:`annotate` each
    record as it is read again (what is kept is counts, and the problems listed)."""

    def __init__(self, block_size: int, kv_capacity_blocks: int | None) -> None:
        self.block_size, self.kv_capacity_blocks = block_size, kv_capacity_blocks
        self.counts: Counter = Counter()
        self.groups: dict[tuple, Counter] = {}
        self.problems: list[dict] = []
        #: Hashes of the distinct (cache domain, block key) pairs sent.
        self.blocks: set[int] = set()

    def judge(self, sent: list[pm.Sent]) -> dict[int, pm.Judgement]:
        """Judgements of one pass's ``prime`` and ``measure`` requests, by ``Sent.id``."""
        for s in sent:
            if s.layout is not None:
                self.blocks.update(hash((s.salt, k)) for k in s.layout.block_keys)
        return pm.judge(sent, self.block_size, reached_by)

    def annotate(self, r: Record, judged: dict[int, pm.Judgement]) -> None:
        """Annotate a ``prime`` or ``measure`` record with its judgement, and count it."""
        j = judged[r["seq"]]
        verdict = j.verdict if r["ok"] else Judged.FAILED
        exact = verdict not in (Judged.FAILED, Judged.NO_LAYOUT)
        r.update(judgement=verdict, cached_lower=j.lower, cached_upper=j.upper,
                 output_block_tokens=j.output_tokens, unknown_source_tokens=j.unknown_tokens,
                 expected_cached_tokens=j.expected if exact else None,
                 leaked_tokens=j.leaked_tokens, missing_tokens=j.missing_tokens)
        counts = _counts(r)
        self.counts.update(counts)
        self.groups.setdefault((r["path"], r["modality"], r["salt_mode"]), Counter()).update(counts)
        if verdict in (Judged.LEAK, Judged.UNDER_HIT) and len(self.problems) < MAX_LISTED:
            self.problems.append({k: r.get(k) for k in PROBLEM_FIELDS})

    def summary(self) -> dict:
        """The ``judgements`` section of the results."""
        capacity = self.kv_capacity_blocks
        return {
            "block_size": self.block_size, "kv_capacity_blocks": capacity,
            "distinct_blocks": len(self.blocks),
            "eviction_possible": None if capacity is None else len(self.blocks) > capacity,
            "counts": _complete(self.counts),
            "groups": [{"path": k[0], "modality": k[1], "salt_mode": k[2], **_complete(g)}
                       for k, g in self.groups.items()],
            "problems": self.problems,
        }


def judged_phase(record: Record) -> bool:
    """Whether the cache model judges the record (its ``prime`` and ``measure`` phases)."""
    return record["phase"] in ("prime", MEASURE)


def _counts(r: Record) -> dict[str, int]:
    """One judged record's part of the counts (:data:`COUNT_KEYS`)."""
    verdict, unknown = r["judgement"], r.get("unknown_source_tokens", 0)
    return {
        "requests": 1, "judged": int(verdict in (Judged.MET, Judged.LEAK, Judged.UNDER_HIT)),
        verdict: 1,
        # Unjudged only because blocks of an earlier request's output might match.
        "unjudged_output_blocks": int(
            verdict == Judged.UNJUDGED and not unknown
            and r["cached_upper"] - r.get("output_block_tokens", 0) == r["cached_lower"]),
        "unjudged_unknown_source": int(verdict == Judged.UNJUDGED and unknown > 0),
        "leaked_tokens": r.get("leaked_tokens") or 0,
        "missing_tokens": r.get("missing_tokens") or 0}


def _complete(counts: Counter) -> dict:
    """Counts with every key, zeros included (a Counter sum drops them)."""
    return {k: counts[k] for k in COUNT_KEYS}


def expectation(record: Record, block_size: int) -> str | None:
    """The model's exact expectation as the oracle's word: full, partial or none."""
    expected = record.get("expected_cached_tokens")
    if expected is None or record.get("prompt_tokens") is None:
        return None
    if expected == 0:
        return NONE
    return FULL if expected == full_hit_tokens(record["prompt_tokens"], block_size) else PARTIAL


class OracleAgreement:
    """Does the workload's oracle (computed when the workload was generated) agree with the
    cache model on what was actually sent? Fed judged records one at a time.

    Compared on the salted passes of the paths that carry media (the oracle keys media by
    content; the token path drops media), on the first traversal of the workload
    (``prime`` if primed, else ``measure``), where the model's expectation is exact. Not
    behind a router: the oracle knows one cache, not where the router sends requests.
    """

    def __init__(self, primed: bool, block_size: int) -> None:
        self.first, self.block_size = "prime" if primed else MEASURE, block_size
        self.compared = self.agreed = 0
        self.disagreements: list[dict] = []

    def add(self, r: Record) -> None:
        if not (r["phase"] == self.first and r["salt_mode"] == "salted"
                and not behind_router(r) and r["path"] in media_paths()
                and r.get("oracle") in (FULL, NONE)):
            return
        if (model := expectation(r, self.block_size)) is None:
            return
        self.compared += 1
        if r["oracle"] == model:
            self.agreed += 1
        elif len(self.disagreements) < MAX_DISAGREEMENTS:
            self.disagreements.append({"path": r["path"], "request_id": r["request_id"],
                                       "oracle": r["oracle"], "model": model})

    def summary(self) -> dict:
        return {"compared": self.compared, "agreed": self.agreed,
                "disagreements": self.disagreements}
