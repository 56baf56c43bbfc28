"""What a run found, in plain sentences, for the top of every report (before any metadata).

One sentence per finding: what a tenant can get or learn, on which paths and modalities;
what failed the run; what salting cost in prefix-cache hits. Built from the results and the
isolation document only, so the console, HTML and Markdown say the same.
"""

from __future__ import annotations

from collections import defaultdict

from bench.verdicts.runs import problems
from bench.vocab import ISOLATED, NOT_AVAILABLE

#: The side-channel rows that test a channel across tenants (the others are controls).
CROSS_TENANT = "cross-tenant-media"
#: The uuid probe's step where a different item is sent under another salt with the same uuid.
UUID_CROSS_STEP = "y-salt-b-same-uuid"


def _where(keys: list[tuple[str, str]]) -> str:
    """``chat (image, audio), generate-parts (video)``."""
    by_path: dict[str, list[str]] = defaultdict(list)
    for path, modality in keys:
        by_path[path].append(modality)
    return ", ".join(f"{p} ({', '.join(m)})" for p, m in by_path.items())


def isolation_findings(isolation: dict) -> list[str]:
    """The KV verdicts, the uuid probe and the timing channel, one sentence each."""
    out = []
    cells = [c for c in isolation.get("cells", []) if c.get("verdict") != NOT_AVAILABLE]
    bad: dict[str, list[dict]] = defaultdict(list)
    for c in cells:
        if c["verdict"] != ISOLATED:
            bad[c["verdict"]].append(c)
    for verdict, rows in bad.items():
        leaked = sum(c.get("leaked_tokens") or 0 for c in rows)
        tokens = f", {leaked:,} tokens beyond the salt rules" if leaked else ""
        out.append(f"KV cache {verdict} on {_where([(c['path'], c['modality']) for c in rows])}"
                   f"{tokens}.")
    if cells and not bad:
        out.append(f"KV cache isolated by salt on every path and modality probed "
                   f"({len(cells)} cells).")
    if not isolation.get("complete", True):
        out.append("The isolation experiment did not finish: cells not probed are not judged.")
    substituted = [u["path"] for u in isolation.get("uuid_probe", [])
                   if (u.get("steps", {}).get(UUID_CROSS_STEP, {}).get("mm_cache_hits") or 0) > 0]
    if substituted:
        out.append("Media caches: a different image sent under another salt with the same "
                   f"client uuid was served from the multimodal cache on {', '.join(substituted)} "
                   "(the other tenant's processed image).")
    timed = [r for r in isolation.get("side_channel", []) if r.get("kind") == CROSS_TENANT]
    seen = [r for r in timed if r.get("finding") == "distinguishable"]
    if seen:
        low, high = min(r["auc"] for r in seen), max(r["auc"] for r in seen)
        aucs = f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f} to {high:.2f}"
        out.append("Timing: TTFT shows whether another tenant recently sent the same media, "
                   f"on {_where([(r['path'], r['modality']) for r in seen])} "
                   f"(paired AUC {aucs}; 1 = slower in every pair when unseen).")
    elif timed:
        out.append(f"Timing: no evidence of a cross-tenant media channel in {len(timed)} rows "
                   "(see the smallest AUC each could detect).")
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
    return out + salt_cost(results)
