"""The request verdicts over records held in memory, for tests: the same accumulators
that ``bench.results.build_results`` streams a pass's records through."""

from __future__ import annotations

from bench.verdicts.requests import (
    Judgements,
    OracleAgreement,
    judged_phase,
    layouts_by_request,
    to_sent,
)


def judge_records(records: list[dict], layouts: list[dict], block_size: int,
                  kv_capacity_blocks: int | None) -> dict:
    """Judge and annotate every ``prime`` and ``measure`` record, pass by pass."""
    judgements = Judgements(block_size, kv_capacity_blocks)
    by_pass: dict[int, list[dict]] = {}
    for r in filter(judged_phase, records):
        by_pass.setdefault(r["pass"], []).append(r)
    for index, recs in by_pass.items():
        shapes = layouts_by_request(s for s in layouts if s["pass"] == index)
        judged = judgements.judge([to_sent(r, shapes.get(r["request_id"])) for r in recs])
        for r in recs:
            judgements.annotate(r, judged)
    return judgements.summary()


def oracle_agreement(records: list[dict], primed: bool, block_size: int) -> dict:
    """:class:`OracleAgreement` over judged ``records``."""
    agreement = OracleAgreement(primed, block_size)
    for r in records:
        agreement.add(r)
    return agreement.summary()
