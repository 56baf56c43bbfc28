"""What a run found, in plain sentences, for the top of every report (before any metadata).

One sentence per finding: what a tenant can get or learn, on which paths and modalities;
what failed the run; what salting cost in prefix-cache hits. Built from the results and the
isolation document only, so the console, HTML and Markdown say the same.
"""

from __future__ import annotations

from collections import defaultdict

from bench.stats import POWER_TARGET
from bench.verdicts.boundary import FOUND, boundary_rows, channel_worst, per_cell, policy
from bench.verdicts.runs import problems
from bench.vocab import (
    CONTENT,
    EXPOSED,
    ISOLATED,
    KV,
    LEAK,
    NOT_AVAILABLE,
    NOT_DETECTED,
    SUBSTITUTED,
    TIMING,
    UNDERPOWERED,
)


def _where(rows: list[dict], channel: str) -> str:
    """``chat (image, audio), generate-parts (video on r1)``: behind a router, the
    replicas with a finding in ``channel`` are named."""
    by_path: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        on = r.get("found_on", {}).get(channel)
        by_path[r["path"]].append(r["modality"] + (f" on {', '.join(on)}" if on else ""))
    return ", ".join(f"{p} ({', '.join(m)})" for p, m in by_path.items())


def _rows_with(rows: list[dict], channel: str, verdicts: set[str]) -> str:
    return _where([r for r in rows if r[channel] in verdicts], channel)


def _kv(rows: list[dict]) -> list[str]:
    served = [r for r in rows if r[KV] != NOT_AVAILABLE]
    bad: dict[str, list[dict]] = defaultdict(list)
    for r in served:
        if r[KV] != ISOLATED:
            bad[r[KV]].append(r)
    out = []
    for verdict, found in bad.items():
        leaked = sum(r["leaked_tokens"] for r in found)
        tokens = f", {leaked:,} tokens beyond the salt rules" if leaked else ""
        what = ("A tenant reuses KV blocks cached under another salt" if verdict == LEAK
                else f"KV cache {verdict}")
        out.append(f"{what} on {_where(found, KV)}{tokens}.")
    if served and not bad:
        out.append(f"KV cache isolated by salt on every path and modality probed "
                   f"({len(served)} cells).")
    return out


def _content(rows: list[dict]) -> list[str]:
    substituted = _rows_with(rows, CONTENT, {SUBSTITUTED})
    if substituted:
        return ["Media content: a tenant that sends an item with another tenant's client uuid "
                "is answered about the other tenant's item (served from the multimodal "
                f"cache across salts) on {substituted}."]
    if any(r[CONTENT] == ISOLATED for r in rows):
        return ["Media content: no item was served in another's place across salts."]
    return []


def _timing(rows: list[dict]) -> list[str]:
    exposed = [r for r in rows if r[TIMING] == EXPOSED]
    if not exposed:
        probed = [r for r in rows if r[TIMING] in (NOT_DETECTED, UNDERPOWERED)]
        weak = [r for r in probed if r[TIMING] == UNDERPOWERED]
        if not probed:
            return []
        return [f"Timing: no evidence that TTFT shows another tenant's media in {len(probed)} "
                f"rows" + (f" ({len(weak)} too small to have seen a paired AUC of "
                           f"{POWER_TARGET['target_auc']}: UNDERPOWERED)." if weak else ".")]
    low, high = min(r["auc"] for r in exposed), max(r["auc"] for r in exposed)
    aucs = f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f} to {high:.2f}"
    guesses = [r["guess"] for r in exposed if r.get("guess")]
    gain = ""
    if guesses:
        one = min(g["accuracy"]["1"][0] for g in guesses)
        needed = [g["probes_for_target"] for g in guesses]
        pairs = (f"at most {max(needed)} probe pairs reach 95% even at the interval's low end"
                 if all(needed) else "some rows need more pairs than measured to reach 95%")
        gain = f"; one probe pair guesses right {one:.0%} of the time or more, {pairs}"
    return ["Timing: a tenant's TTFT shows whether another tenant recently sent the same "
            f"media on {_where(exposed, TIMING)} (paired AUC "
            f"{aucs}{gain})."]


def isolation_findings(isolation: dict) -> list[str]:
    """One sentence per channel of the tenant boundary (KV cache, media content, timing),
    those the run's policy fails on marked FAILS."""
    rows = per_cell(boundary_rows(isolation))
    gated = policy(isolation)
    out = []
    for channel, sentences in ((KV, _kv(rows)), (CONTENT, _content(rows)),
                               (TIMING, _timing(rows))):
        failing = channel in gated and channel_worst(rows, channel) in FOUND
        out += [f"FAILS: {s}" if failing else s for s in sentences]
    if not isolation.get("complete", True):
        out.append("The isolation experiment did not finish: cells not probed are not judged.")
    return out


def salt_cost(results: dict) -> list[str]:
    """What salting cost in prefix-cache hit rate, per path (pooled over the run's passes)."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for p in results.get("passes", []):
        if p.get("prompt_tokens") and p.get("cached_tokens") is not None:
            s = sums[(p["path"], p["salt_mode"])]
            s[0] += p["cached_tokens"]
            s[1] += p["prompt_tokens"]
    out = []
    for path in dict.fromkeys(k[0] for k in sums):
        none, salted = sums.get((path, "none")), sums.get((path, "salted"))
        if none and salted and none[1] and salted[1]:
            a, b = none[0] / none[1], salted[0] / salted[1]
            out.append(f"{path} {a:.1%} → {b:.1%} ({(b - a) * 100:+.1f} pp)")
    return [f"Prefix-cache hit rate without salt → salted: {'; '.join(out)}."] if out else []


def findings(results: dict, isolation: dict | None) -> list[str]:
    """Every finding of one run, the ones that fail it first."""
    out = [f"FAILS: {p}." for p in problems(results)]
    if isolation is not None:
        out += isolation_findings(isolation)
    out += salt_cost(results)
    return sorted(out, key=lambda f: not f.startswith("FAILS: "))  # stable: failing first
