"""Judgements of a run behind a router: per replica, and of the router's choices.

Each replica has its own prefix cache, so a request can only hit what was cached on the
replica that served it: the cache model keys its blocks by salt and replica
(:func:`bench.verdicts.requests.cache_domain`). Judging the same requests as if the caches
were shared otherwise says what the routing did:

- a *repeat* would be guaranteed a hit on one shared cache (salt rules kept); it *stayed*
  when it landed where all of that is cached; the tokens it lost are the routing's cost;
- an *exposed* request has an identical prefix cached under another salt (or none) on
  some replicas but not all, so that the router had a choice; it was *misdirected* when
  sent to one of those, for a hit the salt rules forbid (a random choice would send
  ``misdirected_by_chance`` of them there);
- load: requests per replica, and the busiest replica's share over the mean (1 = even).

Per replica, the requests' prompt and cached tokens must equal the replica's counter delta.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import asdict, replace

from bench.measured.records import PassInfo, Record
from bench.metrics import group_by
from bench.verdicts import prefix_model as pm
from bench.verdicts.requests import behind_router, to_sent
from bench.verdicts.runs import HITS, QUERIES, counters_agree, counters_exact
from bench.vocab import MEASURE, Judged


def _lower(sent: list[pm.Sent], domain: Callable[[pm.Sent], Hashable],
           block_size: int) -> dict[int, int]:
    """Guaranteed cached tokens per request when caches are shared by ``domain``."""
    judged = pm.judge([replace(s, salt=domain(s)) for s in sent], block_size)
    return {rid: j.lower for rid, j in judged.items()}


def _holders(sent: list[pm.Sent], replicas: list[str], block_size: int) -> dict[int, set]:
    """Per request, the replicas that held another salt's identical prefix when it started:
    where salts ignored would guarantee it more than its own salt does. Each request is
    judged as if sent to every replica (a copy that never completes is no one's source)."""
    ids = itertools.count(max(s.id for s in sent) + 1)
    copies = {(s.id, r): (s if r == s.salt[1] else replace(
        s, id=next(ids), salt=(s.salt[0], r), first_token=None, end=None, cached=None))
        for s in sent for r in replicas}
    batch = list({c.id: c for c in copies.values()}.values())
    salted = _lower(batch, lambda c: c.salt, block_size)
    unsalted = _lower(batch, lambda c: c.salt[1], block_size)
    return {s.id: {r for r in replicas if unsalted[copies[s.id, r].id] > salted[copies[s.id, r].id]}
            for s in sent}


def routing(sent: list[pm.Sent], replicas: list[str], block_size: int) -> dict:
    """Repeats, how many stayed, tokens lost; requests exposed with a choice (another
    salt's identical prefix on some replicas but not all), how many were misdirected to
    one of those, and how many a uniformly random choice would have sent there
    (``sent``'s ``salt`` is the cache domain: (salt digest, replica))."""
    here = _lower(sent, lambda s: s.salt, block_size)
    shared = _lower(sent, lambda s: s.salt[0], block_size)  # one cache for every replica
    holders = _holders(sent, replicas, block_size)
    repeats = [i for i in here if shared[i] > 0]
    exposed = [s for s in sent if 0 < len(holders[s.id]) < len(replicas)]
    return {"repeats": len(repeats),
            "stayed": sum(here[i] >= shared[i] for i in repeats),
            "lost_tokens": sum(max(shared[i] - here[i], 0) for i in here),
            "exposed": len(exposed),
            "misdirected": sum(s.salt[1] in holders[s.id] for s in exposed),
            "misdirected_by_chance": round(sum(len(holders[s.id]) / len(replicas)
                                               for s in exposed), 2)}


def load(records: list[Record], replicas: list[str]) -> dict:
    """Measured requests per replica, and the busiest one's count over the mean."""
    counts = Counter(r.get("replica") for r in records)
    per = {name: counts.get(name, 0) for name in replicas}
    mean = sum(per.values()) / len(per) if per else 0
    return {"requests": per, "unattributed": counts.get(None, 0),
            "imbalance": max(per.values()) / mean if mean else None}


def replica_counts(records: list[Record], deltas: dict[str, dict]) -> dict[str, dict]:
    """Per replica: the requests' prompt and cached tokens, its counter delta, agreement,
    and the leaks judged there."""
    out = {}
    for name, delta in deltas.items():
        done = [r for r in records if r["ok"] and r.get("replica") == name]
        prompt = sum(r["prompt_tokens"] or 0 for r in done)
        cached = sum(r["cached_tokens"] or 0 for r in done)
        leaks = [r for r in done if r.get("judgement") == Judged.LEAK]
        out[name] = {"requests": len(done), "prompt_tokens": prompt, "cached_tokens": cached,
                     "counter_queries": delta.get(QUERIES), "counter_hits": delta.get(HITS),
                     "agree": counters_agree(delta, prompt, cached),
                     "exact": counters_exact(delta, prompt, cached), "leaks": len(leaks),
                     "leaked_tokens": sum(r["leaked_tokens"] for r in leaks)}
    return out


def pass_routing(info: dict, records: list[Record], sent: list[pm.Sent],
                 block_size: int) -> dict:
    """One pass behind a router: load, per-replica counters and the routing figures."""
    measured = [r for r in records if r["phase"] == MEASURE]
    deltas = info.get("replicas", {}).get("counters", {})
    replicas = list(deltas) or sorted({r["replica"] for r in records if r.get("replica")})
    known = all(s.layout is not None for s in sent)
    return {"pass": info["index"], "path": info["path"], "salt_mode": info["salt_mode"],
            "repetition": info.get("repetition", 0),
            "attribution": info.get("replicas", {}).get("attribution"),
            **load(measured, replicas),
            "per_replica": replica_counts(measured, deltas),
            "routing": routing(sent, replicas, block_size) if known and sent else None}


def summarise(passes: list[dict]) -> list[dict]:
    """Routing figures per path x salt mode, summed over repetitions."""
    out = []
    for (path, mode), rows in group_by(passes, ("path", "salt_mode")).items():
        figures = [r["routing"] for r in rows if r["routing"]]
        total = {k: sum(f[k] for f in figures) for k in (
            "repeats", "stayed", "lost_tokens", "exposed", "misdirected",
            "misdirected_by_chance")}
        imbalance = [r["imbalance"] for r in rows if r["imbalance"] is not None]
        out.append({"path": path, "salt_mode": mode, **total,
                    "affinity": total["stayed"] / total["repeats"] if total["repeats"] else None,
                    "misdirected_share": (total["misdirected"] / total["exposed"]
                                          if total["exposed"] else None),
                    "imbalance": max(imbalance) if imbalance else None,
                    "unattributed": sum(r["unattributed"] for r in rows)})
    return out


def replica_pass(info: PassInfo, records: list[Record], shapes: dict[str, pm.Layout | None],
                 block_size: int) -> dict | None:
    """One pass's row of the ``replicas`` section (:func:`pass_routing`, over its prime and
    measure requests; ``shapes``: :func:`~bench.verdicts.requests.layouts_by_request`);
    None if the pass was not sent behind a router."""
    if not any(behind_router(r) for r in records):
        return None
    recs = [r for r in records if r["phase"] in ("prime", MEASURE)]
    sent = [to_sent(r, shapes.get(r["request_id"])) for r in recs]
    return pass_routing(asdict(info), recs, sent, block_size)


def replica_section(rows: list[dict | None]) -> dict | None:
    """The ``replicas`` section of a run's results from its passes' :func:`replica_pass`
    rows (None for a single server): per pass and per path x salt mode."""
    if all(row is None for row in rows):
        return None
    rows = [row for row in rows if row is not None]
    return {"passes": rows, "groups": summarise(rows)}
