"""The results JSON of a run: metadata, per-pass counters and per-group metrics.

Schema (``schema_version`` = :data:`bench.SCHEMA_VERSION`)::

    {"schema_version", "kind": "saltbench-run", "run_id", "interrupted",
     "stopped": why the run stopped early (server gone, deadline) or null,
     "unavailable": {path: why the server cannot serve it},
     "metadata": {saltbench/machine/date, "target": {...}, "workload": {...}, "options": {...}},
     "passes": [{"index", "path", "salt_mode", "tag", "repetition", "duration_s",
                 "counters": {delta},
                 "hit_rate_requests", "hit_rate_counters", "counters_agree", "counters_exact",
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

from array import array
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

from bench import SCHEMA_VERSION
from bench.docio import read_document, write_json
from bench.measured import counters
from bench.measured.records import PassInfo, PassLines, Record
from bench.metrics import GroupMetrics, Metrics, group_by
from bench.outputs import LAYOUTS_FILE, RECORDS_FILE, RESULTS_FILE, RESULTS_KIND
from bench.registry import METRICS
from bench.verdicts.replicas import replica_pass, replica_section
from bench.verdicts.requests import (
    Judgements,
    OracleAgreement,
    behind_router,
    judged_phase,
    layouts_by_request,
    to_sent,
)
from bench.verdicts.runs import PromptTokens, counters_agree, counters_exact
from bench.vocab import FAILURES, MEASURE

GROUP_KEYS = ("path", "modality", "salt_mode")


class PassTally:
    """One pass's measured records, fed one at a time: metrics, failures by kind, and
    TTFT of prefix-cache hits (cached tokens > 0) and of misses."""

    def __init__(self, slos: dict[str, float] | None = None) -> None:
        self.metrics = Metrics(slos)
        self.failures: dict[str, int] = {}
        self.examples: dict[str, str | None] = {}
        self.ttft = {"hit": array("d"), "miss": array("d")}

    def add(self, r: Record) -> None:
        self.metrics.add(r)
        self.add_outcome(r)

    def add_outcome(self, r: Record) -> None:
        """Count the record's failure kind or its TTFT as a hit's or a miss's."""
        if r["ok"]:
            self.ttft["hit" if r.get("cached_tokens") else "miss"].append(r["ttft_ms"])
        elif kind := r.get("failure"):  # a record without a kind counts only in "failed"
            self.failures[kind] = self.failures.get(kind, 0) + 1
            self.examples.setdefault(kind, r.get("error"))

    def hit_miss_ttft(self) -> dict:
        out: dict = {}
        for kind, values in self.ttft.items():
            out[f"{kind}_count"] = len(values)
            for q in (50, 99):
                out[f"p{q}_ttft_{kind}_ms"] = float(np.percentile(values, q)) if values else None
        return out

    def summary(self, info: PassInfo) -> dict:
        """The pass's row of ``passes``: metrics with hit rates from both sources, failures
        per :data:`bench.vocab.FAILURES` kind (in that order) with the first error of each."""
        metrics = self.metrics.result(info.duration_s)
        return {**asdict(info), **metrics, **self.hit_miss_ttft(),
                "failures": {k: self.failures[k] for k in FAILURES if k in self.failures},
                "failure_examples": {k: self.examples[k] for k in FAILURES if k in self.examples},
                "hit_rate_requests": metrics["hit_rate"],
                "hit_rate_counters": counters.counter_hit_rate(info.counters),
                "counters_agree": counters_agree(info.counters, metrics["prompt_tokens"],
                                                 metrics["cached_tokens"]),
                "counters_exact": counters_exact(info.counters, metrics["prompt_tokens"],
                                                 metrics["cached_tokens"])}


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
    """The results document, streamed: per pass, its records are read once for the cache
    model's view of them (judged together) and once more to annotate each with its
    judgement and feed it to the tallies; only the model's view and the tallies are held
    (and, behind a router, the pass's records for its routing figures)."""
    target = metadata.get("target", {})
    block_size = target.get("block_size")
    judgements = Judgements(block_size, (target.get("cache_config") or {}).get("num_gpu_blocks"))
    oracle = OracleAgreement(bool(metadata.get("options", {}).get("prime")), block_size)
    prompt_tokens = PromptTokens()
    slos = metadata.get("options", {}).get("goodput")
    infos = {p.index: p for p in passes}
    summaries, groups, replica_rows = [], [], []
    for index in sorted(infos.keys() | set(records.indices())):
        shapes = layouts_by_request(layouts.read(index))
        judged = judgements.judge([to_sent(r, shapes.get(r["request_id"]))
                                   for r in records.read(index) if judged_phase(r)])
        tally, by_group, routed = PassTally(slos), GroupMetrics(GROUP_KEYS, slos), []
        for r in records.read(index):
            if judged_phase(r):
                judgements.annotate(r, judged)
                if behind_router(r):
                    routed.append(r)
            oracle.add(r)
            prompt_tokens.add(r)
            if r["phase"] == MEASURE:
                tally.add(r)
                by_group.add(r)
        if (info := infos.get(index)) is None:
            continue
        summaries.append(tally.summary(info))
        # A group's throughput is its share of its own pass's duration.
        groups += [{**row, "repetition": info.repetition}
                   for row in by_group.rows(info.duration_s)]
        replica_rows.append(replica_pass(info, routed, shapes, block_size) if routed else None)
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
        "oracle": oracle.summary(),
    }


def write_results(path: Path, results: dict) -> None:
    write_json(path, results)


def read_results(path: Path) -> dict:
    return read_document(path, RESULTS_KIND, SCHEMA_VERSION)


def rebuild_results(directory: Path, metadata: dict | None = None) -> dict:
    """A run's ``results.json`` built again, with the current code, from its own records and
    layouts (``metadata`` in place of the stored one, e.g. with objectives); written and
    returned."""
    stored = read_results(directory / RESULTS_FILE)
    names = {f.name for f in fields(PassInfo)}
    passes = [PassInfo(**{k: v for k, v in p.items() if k in names}) for p in stored["passes"]]
    results = build_results(stored["run_id"], metadata or stored["metadata"], passes,
                            PassLines(directory / RECORDS_FILE),
                            PassLines(directory / LAYOUTS_FILE), stored["interrupted"],
                            stored["unavailable"], stored.get("stopped"))
    write_results(directory / RESULTS_FILE, results)
    return results
