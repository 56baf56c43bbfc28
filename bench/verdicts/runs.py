"""Judgements of a whole run: server counters against requests, paths against each other,
and the problems that fail a CI step."""

from __future__ import annotations

from bench.paths import media_paths
from bench.run.records import Record
from bench.vocab import FAILURES, MEASURE


def counters_agree(delta: dict[str, float], prompt_tokens: int | None,
                   cached_tokens: int | None) -> bool | None:
    """Do the server's prefix-cache counters match the tokens the requests reported?

    ``None`` when either side is unknown (no counters, or a request without usage).
    """
    queries = delta.get("vllm:prefix_cache_queries_total")
    hits = delta.get("vllm:prefix_cache_hits_total")
    if queries is None or prompt_tokens is None or cached_tokens is None:
        return None
    return hits == cached_tokens and queries == prompt_tokens


class PromptTokens:
    """Logical requests whose prompt token count differs between paths that carry media,
    fed one record at a time (a count per request, path and salt mode is kept)."""

    def __init__(self) -> None:
        self.seen: dict[tuple, dict[str, int]] = {}

    def add(self, r: Record) -> None:
        if (r["ok"] and r["path"] in media_paths() and r["phase"] == MEASURE
                and r.get("prompt_tokens") is not None):
            self.seen.setdefault((r["request_id"], r["salt_mode"]), {})[r["path"]] = (
                r["prompt_tokens"])

    def mismatches(self) -> list[dict]:
        return [{"request_id": rid, "salt_mode": mode, "prompt_tokens": counts}
                for (rid, mode), counts in self.seen.items() if len(set(counts.values())) > 1]


def failure_totals(passes: list[dict]) -> dict[str, int]:
    """Failed measured requests per kind over ``passes`` (their ``failures``), in
    :data:`bench.vocab.FAILURES` order."""
    totals = {kind: sum(p.get("failures", {}).get(kind, 0) for p in passes) for kind in FAILURES}
    return {kind: n for kind, n in totals.items() if n}


def replica_problems(results: dict) -> list[str]:
    """Why a run behind a router should fail a CI step: requests no replica claims, and
    replica counters that disagree with the requests served there."""
    section = results.get("replicas")
    if not section:
        return []
    out = []
    if unknown := sum(p["unattributed"] for p in section["passes"]):
        out.append(f"{unknown} measured request(s) could not be attributed to a replica")
    disagree = [f"{p['path']}/{p['salt_mode']} on {name}" for p in section["passes"]
                for name, c in p["per_replica"].items() if c["agree"] is False]
    if disagree:
        out.append("replica counters disagree with the requests served there: "
                   + ", ".join(disagree))
    return out


def problems(results: dict) -> list[str]:
    """Why a run should fail a CI step: failed requests, leaks and under-hits, counters
    that disagree with the requests, paths that disagree on a prompt, an interruption."""
    out = []
    failed = sum(p["failed"] for p in results["passes"])
    if failed:
        kinds = ", ".join(f"{n} {kind}" for kind, n in failure_totals(results["passes"]).items())
        out.append(f"{failed} measured request(s) failed" + (f" ({kinds})" if kinds else ""))
    counts = results["judgements"]["counts"]
    if counts["leak"]:
        out.append(f"{counts['leak']} request(s) got more cached tokens than the salt rules "
                   f"allow ({counts['leaked_tokens']} tokens leaked)")
    if counts["under-hit"]:
        eviction = {True: "possible", False: "not possible", None: "unknown"}[
            results["judgements"]["eviction_possible"]]
        out.append(f"{counts['under-hit']} request(s) got fewer cached tokens than completed "
                   f"requests guarantee ({counts['missing_tokens']} tokens; eviction "
                   f"{eviction} at this KV capacity)")
    if disagree := [p for p in results["passes"] if p.get("counters_agree") is False]:
        out.append("server counters disagree with the requests' cached tokens on pass(es) "
                   + ", ".join(f"{p['path']}/{p['salt_mode']}" for p in disagree))
    if mismatches := results.get("prompt_token_mismatches"):
        out.append(f"{len(mismatches)} request(s) have different prompt token counts on "
                   "different paths")
    oracle = results.get("oracle", {})
    if disagree := oracle.get("compared", 0) - oracle.get("agreed", 0):
        out.append(f"the workload oracle disagrees on {disagree} request(s)")
    out += replica_problems(results)
    if results["interrupted"]:
        out.append("the run was interrupted")
    if results.get("stopped"):
        out.append(f"the run stopped early: {results['stopped']}")
    return out
