"""Judgements of a whole run: server counters against requests, paths against each other,
and the problems that fail a CI step."""

from __future__ import annotations

from bench.measured.counters import BY_SOURCE, CACHED, HITS, PROMPT, QUERIES
from bench.measured.records import Record
from bench.paths import media_paths
from bench.vocab import FAILURES, MEASURE

LOCAL_HIT = f"{BY_SOURCE}{{source=local_cache_hit}}"
EXTERNAL = f"{BY_SOURCE}{{source=external_kv_transfer}}"


def counters_agree(delta: dict[str, float], prompt_tokens: int | None,
                   cached_tokens: int | None) -> bool | None:
    """Do the server's counters match the tokens the requests reported?

    vLLM counts a request's prompt and cached tokens once, when its prefill is done
    (``vllm:prompt_tokens_total``; ``vllm:prompt_tokens_cached_total``, or the
    ``local_cache_hit`` and ``external_kv_transfer`` sources of
    ``vllm:prompt_tokens_by_source_total``): those must equal the requests'. It counts a
    prefix-cache query and its hits again each time the scheduler retries a waiting
    request (KV blocks or encoder budget full), so queries and hits must only be at
    least the requests' (:func:`counters_exact` says whether they are equal). A server
    without the once-per-request counters must match queries and hits exactly.

    ``None`` when either side is unknown (no counters, or a request without usage).
    """
    if delta.get(QUERIES) is None or prompt_tokens is None or cached_tokens is None:
        return None
    cached = delta.get(CACHED)
    if cached is None and LOCAL_HIT in delta:
        cached = delta[LOCAL_HIT] + delta.get(EXTERNAL, 0.0)
    if delta.get(PROMPT) is None or cached is None:
        return counters_exact(delta, prompt_tokens, cached_tokens)
    external = delta.get(EXTERNAL, 0.0)  # cached tokens that no prefix-cache hit counts
    return (delta[PROMPT] == prompt_tokens and cached == cached_tokens
            and delta[QUERIES] >= prompt_tokens and delta.get(HITS, 0.0) + external >= cached_tokens)


def counters_exact(delta: dict[str, float], prompt_tokens: int | None,
                   cached_tokens: int | None) -> bool | None:
    """Do the prefix-cache queries and hits equal the requests' prompt and cached tokens?
    (Information: a retried waiting request counts them again.) ``None`` when unknown."""
    if delta.get(QUERIES) is None or prompt_tokens is None or cached_tokens is None:
        return None
    return delta.get(HITS) == cached_tokens and delta[QUERIES] == prompt_tokens


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


def unjudged_problem(results: dict) -> str | None:
    """Requests the cache model could not judge exactly, where a leak would go unseen: no
    layout, or between their bounds because a source was in flight or had no layout.
    Those unjudged only because an earlier request's output may have filled a block are
    not counted: multi-turn workloads always have them (reported in the counts). ``None``
    when there are none, or the run allows them (``allow_unjudged``)."""
    counts = results["judgements"]["counts"]
    if results.get("metadata", {}).get("options", {}).get("allow_unjudged"):
        return None
    no_layout, unknown = counts.get("no-layout", 0), counts.get("unjudged_unknown_source", 0)
    in_flight = counts.get("unjudged", 0) - counts.get("unjudged_output_blocks", 0) - unknown
    if not (no_layout or unknown or in_flight):
        return None
    return (f"{no_layout + unknown + in_flight} request(s) could not be judged exactly, so a "
            f"leak there would go unseen ({no_layout} without a layout, {unknown} after a "
            f"request without one, {in_flight} with a source in flight); --allow-unjudged "
            "accepts them")


def problems(results: dict) -> list[str]:
    """Why a run should fail a CI step: failed requests, leaks and under-hits, requests
    that could not be judged (:func:`unjudged_problem`), counters that disagree with the
    requests, paths that disagree on a prompt, an interruption."""
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
    if unjudged := unjudged_problem(results):
        out.append(unjudged)
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
