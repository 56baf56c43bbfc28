"""The results JSON of a run: metadata, per-pass counters and per-group metrics.

Schema (``schema_version`` = :data:`bench.SCHEMA_VERSION`)::

    {"schema_version", "kind": "saltbench-run", "run_id", "interrupted",
     "stopped": why the run stopped early (server gone, deadline) or null,
     "unavailable": {path: why the server cannot serve it},
     "metadata": {saltbench/machine/date, "target": {...}, "workload": {...}, "options": {...}},
     "passes": [{"index", "path", "salt_mode", "tag", "repetition", "duration_s",
                 "counters": {delta},
                 "hit_rate_requests", "hit_rate_counters", "counters_agree",
                 "failures": {kind: count}, "failure_examples": {kind: an error},
                 "{hit,miss}_count", "p{50,99}_ttft_{hit,miss}_ms", **metrics}],
     "groups": [{"path", "modality", "salt_mode", "repetition", **metrics}],
     "spread": [{"path", "modality", "salt_mode", "repetitions",
                 "metrics": {name: {"mean", "cv"}}}]  (bench.registry names; --repeat >= 2),
     "judgements": {"counts", "groups", "problems", "eviction_possible", ...}
         (bench.verdicts.requests.Judgements),
     "replicas": behind a router, per pass and per path x salt mode: requests and counters
         per replica, load, routing affinity and misdirection (bench.verdicts.replicas);
         null for a single server,
     "prompt_token_mismatches": [...],
     "oracle": {"compared", "agreed", "disagreements": [...]}}

``metrics`` uses vLLM's key names (``mean_ttft_ms``, ``request_throughput``, ...).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from bench import SCHEMA_VERSION
from bench.docio import read_document, write_json
from bench.metrics import aggregate, aggregate_groups, group_by
from bench.outputs import RESULTS_KIND
from bench.registry import METRICS
from bench.run import counters
from bench.run.records import PassInfo, PassLines, Record
from bench.verdicts.replicas import replica_pass, replica_section
from bench.verdicts.requests import Judgements, add_agreement, oracle_agreement
from bench.verdicts.runs import PromptTokens, counters_agree
from bench.vocab import FAILURES, MEASURE

GROUP_KEYS = ("path", "modality", "salt_mode")


def pass_summary(info: PassInfo, records: list[Record]) -> dict:
    """Metrics of one pass's measured records, with hit rates from both sources."""
    metrics = aggregate(records, info.duration_s)
    return {**asdict(info), **metrics, **hit_miss_ttft(records), **failures(records),
            "hit_rate_requests": metrics["hit_rate"],
            "hit_rate_counters": counters.counter_hit_rate(info.counters),
            "counters_agree": counters_agree(info.counters, metrics["prompt_tokens"],
                                             metrics["cached_tokens"])}


def failures(records: list[Record]) -> dict:
    """Failed records per :data:`bench.vocab.FAILURES` kind (in that order), and the first
    error of each kind; a record that names no kind (written before kinds existed) counts
    only in ``failed``."""
    counts: dict[str, int] = {}
    examples: dict[str, str | None] = {}
    for r in records:
        if not r["ok"] and (kind := r.get("failure")):
            counts[kind] = counts.get(kind, 0) + 1
            examples.setdefault(kind, r.get("error"))
    return {"failures": {k: counts[k] for k in FAILURES if k in counts},
            "failure_examples": {k: examples[k] for k in FAILURES if k in examples}}


def hit_miss_ttft(records: list[Record]) -> dict:
    """TTFT percentiles of prefix-cache hits (cached tokens > 0) and of misses."""
    out: dict = {}
    done = [r for r in records if r["ok"]]
    for kind, recs in (("hit", [r for r in done if r.get("cached_tokens")]),
                       ("miss", [r for r in done if not r.get("cached_tokens")])):
        values = np.asarray([r["ttft_ms"] for r in recs], dtype=float)
        out[f"{kind}_count"] = len(recs)
        for q in (50, 99):
            out[f"p{q}_ttft_{kind}_ms"] = float(np.percentile(values, q)) if len(recs) else None
    return out


def spread(groups: list[dict]) -> list[dict]:
    """Per path x modality x salt mode with two or more repetitions: each headline metric's
    mean over the repetitions and its coefficient of variation (sample std / mean)."""
    out = []
    for key, rows in group_by(groups, GROUP_KEYS).items():
        if len(rows) < 2:
            continue
        metrics = {}
        for name in METRICS:
            values = np.asarray([r.get(name) for r in rows], dtype=float)
            if np.isnan(values).any():
                continue
            mean = float(values.mean())
            metrics[name] = {"mean": mean,
                             "cv": float(values.std(ddof=1) / abs(mean)) if mean else None}
        out.append({**dict(zip(GROUP_KEYS, key)), "repetitions": len(rows), "metrics": metrics})
    return out


def build_results(run_id: str, metadata: dict, passes: list[PassInfo], records: PassLines,
                  layouts: PassLines, interrupted: bool,
                  unavailable: dict[str, str] | None = None, stopped: str | None = None) -> dict:
    """The results document, one pass at a time: each pass's records are read, judged
    (and annotated), summarised and let go before the next."""
    target = metadata.get("target", {})
    block_size = target.get("block_size")
    judgements = Judgements(block_size, (target.get("cache_config") or {}).get("num_gpu_blocks"))
    primed = bool(metadata.get("options", {}).get("prime"))
    prompt_tokens = PromptTokens()
    oracle = {"compared": 0, "agreed": 0, "disagreements": []}
    infos = {p.index: p for p in passes}
    summaries, groups, replica_rows = [], [], []
    for index in sorted(infos.keys() | set(records.indices())):
        recs = records.read(index)
        shapes = layouts.read(index)
        judgements.add_pass(recs, shapes)
        prompt_tokens.add(recs)
        oracle = add_agreement(oracle, oracle_agreement(recs, primed, block_size))
        if (info := infos.get(index)) is None:
            continue
        measured = [r for r in recs if r["phase"] == MEASURE]
        summaries.append(pass_summary(info, measured))
        # A group's throughput is its share of its own pass's duration.
        groups += [{**row, "repetition": info.repetition}
                   for row in aggregate_groups(measured, GROUP_KEYS, info.duration_s)]
        replica_rows.append(replica_pass(info, recs, shapes, block_size))
    return {
        "schema_version": SCHEMA_VERSION, "kind": RESULTS_KIND, "run_id": run_id,
        "interrupted": interrupted, "stopped": stopped, "metadata": metadata,
        "unavailable": unavailable or {},
        "passes": summaries,
        "groups": groups,
        "spread": spread(groups),
        "judgements": judgements.summary(),
        "replicas": replica_section(replica_rows),
        "prompt_token_mismatches": prompt_tokens.mismatches(),
        "oracle": oracle,
    }


def write_results(path: Path, results: dict) -> None:
    write_json(path, results)


def read_results(path: Path) -> dict:
    return read_document(path, RESULTS_KIND, SCHEMA_VERSION)
