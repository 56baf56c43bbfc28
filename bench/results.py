"""The results JSON of a run: metadata, per-pass counters and per-group metrics.

Schema (``schema_version`` = :data:`bench.SCHEMA_VERSION`)::

    {"schema_version", "kind": "saltbench-run", "run_id", "interrupted",
     "metadata": {saltbench/machine/date, "target": {...}, "workload": {...}, "options": {...}},
     "passes": [{"index", "path", "salt_mode", "tag", "duration_s", "counters": {delta},
                 "hit_rate_requests", "hit_rate_counters", "counters_agree",
                 "{hit,miss}_count", "p{50,99}_ttft_{hit,miss}_ms", **metrics}],
     "groups": [{"path", "modality", "salt_mode", **metrics}],
     "expectations": {"checked", "met", "unmet": [...]},
     "prompt_token_mismatches": [...],
     "oracle": {"compared", "agreed", "disagreements": [...]}}

``metrics`` uses vLLM's key names (``mean_ttft_ms``, ``request_throughput``, ...).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bench import SCHEMA_VERSION, counters
from bench.errors import BenchError
from bench.metrics import aggregate, aggregate_groups, group_by
from bench.runner import PassInfo

GROUP_KEYS = ("path", "modality", "salt_mode")
MULTIMODAL_PATHS = ("chat", "generate-parts", "generate-features")


def pass_summary(info: PassInfo, records: list[dict]) -> dict:
    """Metrics of one pass's measured records, with hit rates from both sources."""
    metrics = aggregate(records, info.duration_s)
    d = info.counters
    queries = d.get("vllm:prefix_cache_queries_total")
    hits = d.get("vllm:prefix_cache_hits_total")
    agree = None
    if queries is not None and metrics["cached_tokens"] is not None:
        agree = (hits == metrics["cached_tokens"] and queries == metrics["prompt_tokens"])
    return {**asdict(info), **metrics, **hit_miss_ttft(records),
            "hit_rate_requests": metrics["hit_rate"],
            "hit_rate_counters": counters.counter_hit_rate(d), "counters_agree": agree}


def hit_miss_ttft(records: list[dict]) -> dict:
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


def check_expectations(records: list[dict]) -> dict:
    """Each judged record: did it get the cached tokens its expectation says?"""
    judged = [r for r in records if r.get("expected_cached_tokens") is not None]
    unmet = [{k: r.get(k) for k in ("seq", "phase", "path", "salt_mode", "request_id",
                                    "modality", "expect", "prompt_tokens", "cached_tokens",
                                    "expected_cached_tokens")}
             for r in judged if r.get("cached_tokens") != r["expected_cached_tokens"]]
    return {"checked": len(judged), "met": len(judged) - len(unmet), "unmet": unmet}


def oracle_agreement(records: list[dict], primed: bool) -> dict:
    """Does the workload's oracle (computed when the workload was generated) agree with
    the expectation judged at run time from what was actually sent?

    Compared where both are judgements (full or none): salted passes of the multimodal
    paths (the oracle keys media by content, the token path drops media), on the first
    traversal of the workload (``prime`` if primed, else ``measure``), served in order.
    """
    first = "prime" if primed else "measure"
    compared = [r for r in records
                if r["phase"] == first and r["salt_mode"] == "salted"
                and r["path"] in MULTIMODAL_PATHS and r.get("oracle") in ("full", "none")
                and r["expect"] in ("full", "none")]
    disagree = [{k: r.get(k) for k in ("path", "request_id", "oracle", "expect")}
                for r in compared if r["oracle"] != r["expect"]]
    return {"compared": len(compared), "agreed": len(compared) - len(disagree),
            "disagreements": disagree[:50]}


def prompt_token_mismatches(records: list[dict]) -> list[dict]:
    """Logical requests whose prompt token count differs between multimodal paths."""
    seen: dict[tuple, dict[str, int]] = {}
    for r in records:
        if (r["ok"] and r["path"] in MULTIMODAL_PATHS and r["phase"] == "measure"
                and r.get("prompt_tokens") is not None):
            seen.setdefault((r["request_id"], r["salt_mode"]), {})[r["path"]] = r["prompt_tokens"]
    return [{"request_id": rid, "salt_mode": mode, "prompt_tokens": counts}
            for (rid, mode), counts in seen.items() if len(set(counts.values())) > 1]


def build_results(run_id: str, metadata: dict, passes: list[PassInfo], records: list[dict],
                  interrupted: bool) -> dict:
    measured = [r for r in records if r["phase"] == "measure"]
    by_pass = group_by(measured, ("pass",))
    # A group's throughput is its share of its own pass's duration.
    groups = [row for p in passes
              for row in aggregate_groups(by_pass.get((p.index,), []), GROUP_KEYS, p.duration_s)]
    return {
        "schema_version": SCHEMA_VERSION, "kind": "saltbench-run", "run_id": run_id,
        "interrupted": interrupted, "metadata": metadata,
        "passes": [pass_summary(p, by_pass.get((p.index,), [])) for p in passes],
        "groups": groups,
        "expectations": check_expectations(records),
        "prompt_token_mismatches": prompt_token_mismatches(records),
        "oracle": oracle_agreement(records, bool(metadata.get("options", {}).get("prime"))),
    }


def problems(results: dict) -> list[str]:
    """Why a run should fail a CI step: failed requests, unmet cache expectations."""
    out = []
    failed = sum(p["failed"] for p in results["passes"])
    if failed:
        out.append(f"{failed} measured request(s) failed")
    if unmet := results["expectations"]["unmet"]:
        out.append(f"{len(unmet)} request(s) missed their cache expectation")
    oracle = results.get("oracle", {})
    if disagree := oracle.get("compared", 0) - oracle.get("agreed", 0):
        out.append(f"the workload oracle disagrees on {disagree} request(s)")
    if results["interrupted"]:
        out.append("the run was interrupted")
    return out


def write_results(path: Path, results: dict) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def read_results(path: Path) -> dict:
    try:
        results = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise BenchError(f"{path}: not a readable results file: {exc}") from None
    if results.get("kind") != "saltbench-run":
        raise BenchError(f"{path}: not a saltbench results file (kind={results.get('kind')!r})")
    if results.get("schema_version") != SCHEMA_VERSION:
        raise BenchError(f"{path}: schema_version {results.get('schema_version')} is not "
                         f"{SCHEMA_VERSION}")
    return results
