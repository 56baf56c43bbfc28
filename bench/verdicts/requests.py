"""Every request judged by the prefix-cache model: what it may and must get from the cache.

For each pass, the records of its ``prime`` and ``measure`` phases and the layouts the
server rendered for them go through :func:`bench.verdicts.prefix_model.judge`, which
bounds each request's cached tokens by what completed (guaranteed) and what had started
(allowed) under the same salt before it. Each record is annotated in memory with its
``judgement`` and bounds; the summary counts them per path x modality x salt mode.
Leaked tokens (above what is allowed) and missing tokens (below what is guaranteed) are
summed apart, never netted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable

from bench.paths import media_paths
from bench.run.records import LayoutLine, Record
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
#: The counts of judged requests, in order.
COUNT_KEYS = ("requests", "judged", *JUDGEMENTS, "unjudged_output_blocks", "leaked_tokens",
              "missing_tokens")


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


def to_sent(record: Record, shape: LayoutLine | None) -> pm.Sent:
    """The cache model's view of a record and its rendered layout (none: unknown, as for a
    request behind a router that no replica claims)."""
    layout = None
    if shape and "block_keys" in shape and (not record["ok"]
                                            or shape["n_tokens"] == record["prompt_tokens"]):
        layout = pm.Layout(shape["n_tokens"], tuple(shape["block_keys"]))
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
                   segment=record.get("segment", 0))


class Judgements:
    """The run's judgement, built one pass at a time (a pass's records are all it holds)."""

    def __init__(self, block_size: int, kv_capacity_blocks: int | None) -> None:
        self.block_size, self.kv_capacity_blocks = block_size, kv_capacity_blocks
        self.counts: Counter = Counter()
        self.groups: dict[tuple, Counter] = {}
        self.problems: list[dict] = []
        #: Hashes of the distinct (cache domain, block key) pairs sent.
        self.blocks: set[int] = set()

    def add_pass(self, records: list[Record], layouts: list[LayoutLine]) -> None:
        """Judge and annotate the ``prime`` and ``measure`` records of one pass."""
        recs = [r for r in records if r["phase"] in ("prime", MEASURE)]
        shapes = {s["request_id"]: s for s in layouts}
        sent = [to_sent(r, shapes.get(r["request_id"])) for r in recs]
        # A request without a layout could be the source of another's hit: judge none.
        complete = all(s.layout is not None for s in sent)
        judged = pm.judge(sent if complete else [], self.block_size)
        for r, s in zip(recs, sent):
            j = judged.get(s.id, pm.Judgement(0, 0, Judged.NO_LAYOUT, 0, 0))
            verdict = j.verdict if r["ok"] else Judged.FAILED
            exact = verdict not in (Judged.FAILED, Judged.NO_LAYOUT)
            r.update(judgement=verdict, cached_lower=j.lower, cached_upper=j.upper,
                     output_block_tokens=j.output_tokens,
                     expected_cached_tokens=j.expected if exact else None,
                     leaked_tokens=j.leaked_tokens, missing_tokens=j.missing_tokens)
            if s.layout is not None:
                self.blocks.update(hash((s.salt, k)) for k in s.layout.block_keys)
        self.counts += _counts(recs)
        for key, group in _groups(recs).items():
            self.groups[key] = self.groups.get(key, Counter()) + _counts(group)
        room = MAX_LISTED - len(self.problems)
        self.problems += [{k: r.get(k) for k in PROBLEM_FIELDS} for r in recs
                          if r["judgement"] in (Judged.LEAK, Judged.UNDER_HIT)][:max(room, 0)]

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


def judge_records(records: list[Record], layouts: list[LayoutLine], block_size: int,
                  kv_capacity_blocks: int | None) -> dict:
    """Judge and annotate every record of the ``prime`` and ``measure`` phases (all in
    memory: :class:`Judgements` takes them a pass at a time)."""
    judgements = Judgements(block_size, kv_capacity_blocks)
    by_pass: dict[int, list[Record]] = {}
    for r in records:
        by_pass.setdefault(r["pass"], []).append(r)  # type: ignore[typeddict-item]
    for index, recs in by_pass.items():
        judgements.add_pass(recs, [s for s in layouts if s["pass"] == index])  # type: ignore[typeddict-item]
    return judgements.summary()


def _groups(records: list[Record]) -> dict[tuple, list[Record]]:
    out: dict[tuple, list[Record]] = {}
    for r in records:
        out.setdefault((r["path"], r["modality"], r["salt_mode"]), []).append(r)
    return out


def _counts(records: list[Record]) -> Counter:
    n = Counter(r["judgement"] for r in records)
    return Counter(
        requests=len(records), judged=n[Judged.MET] + n[Judged.LEAK] + n[Judged.UNDER_HIT],
        **{j: n[j] for j in JUDGEMENTS},
        # Unjudged only because blocks of an earlier request's output might match.
        unjudged_output_blocks=sum(
            r["judgement"] == Judged.UNJUDGED
            and r["cached_upper"] - r.get("output_block_tokens", 0) == r["cached_lower"]
            for r in records),
        leaked_tokens=sum(r.get("leaked_tokens") or 0 for r in records),
        missing_tokens=sum(r.get("missing_tokens") or 0 for r in records))


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


def oracle_agreement(records: list[Record], primed: bool, block_size: int) -> dict:
    """Does the workload's oracle (computed when the workload was generated) agree with the
    cache model on what was actually sent?

    Compared on the salted passes of the paths that carry media (the oracle keys media by
    content; the token path drops media), on the first traversal of the workload
    (``prime`` if primed, else ``measure``), where the model's expectation is exact. Not
    behind a router: the oracle knows one cache, not where the router sends requests.
    Results of several calls (a pass each) add up with :func:`add_agreement`.
    """
    first = "prime" if primed else MEASURE
    compared = [(r, expectation(r, block_size)) for r in records
                if r["phase"] == first and r["salt_mode"] == "salted" and not behind_router(r)
                and r["path"] in media_paths() and r.get("oracle") in (FULL, NONE)]
    compared = [(r, e) for r, e in compared if e is not None]
    disagree = [{"path": r["path"], "request_id": r["request_id"], "oracle": r["oracle"],
                 "model": e} for r, e in compared if r["oracle"] != e]
    return {"compared": len(compared), "agreed": len(compared) - len(disagree),
            "disagreements": disagree[:MAX_DISAGREEMENTS]}


def add_agreement(total: dict, part: dict) -> dict:
    """Two :func:`oracle_agreement` results as one."""
    return {"compared": total["compared"] + part["compared"],
            "agreed": total["agreed"] + part["agreed"],
            "disagreements": (total["disagreements"] + part["disagreements"])[:MAX_DISAGREEMENTS]}
