"""Tables of a run behind a router: per replica, and what the routing did."""

from __future__ import annotations

from bench.report.tables import AGREE, Table, fmt, rate, with_repetition


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "–"


def replica_table(results: dict) -> Table:
    """Per pass: requests, hit rate and counter agreement of each replica, and leaks."""
    rows = []
    for p in results["replicas"]["passes"]:
        for name, c in p["per_replica"].items():
            hit = c["cached_tokens"] / c["prompt_tokens"] if c["prompt_tokens"] else None
            rows.append([p["path"], p["salt_mode"], name, str(c["requests"]), rate(hit),
                         fmt(c["counter_hits"], ".0f"), fmt(c["counter_queries"], ".0f"),
                         AGREE[c["agree"]], str(c["leaks"]), str(c["leaked_tokens"])])
    return Table("Per replica (measure phase)",
                 ["path", "salt mode", "replica", "requests", "hit rate (requests)",
                  "counter hits", "counter queries", "counters agree", "leaks", "leaked tokens"],
                 rows, keys=3)


def routing_table(results: dict) -> Table:
    """Per pass: how requests were attributed, load, affinity and misdirection."""
    passes = results["replicas"]["passes"]
    rows = []
    for p in passes:
        r = p["routing"] or {}
        rows.append([p["path"], p["salt_mode"], p["attribution"] or "–",
                     " / ".join(f"{k} {v}" for k, v in p["requests"].items()),
                     fmt(p["imbalance"], ".2f"), str(p["unattributed"]),
                     _share(r.get("stayed", 0), r.get("repeats", 0)),
                     str(r.get("lost_tokens", "–")),
                     _share(r.get("misdirected", 0), r.get("exposed", 0)),
                     fmt(r.get("misdirected_by_chance"), ".1f")])
    return with_repetition(passes, Table(
        "Routing (repeats that stayed with their prefix; requests sent where another salt's "
        "identical prefix is cached, of those that had a choice)",
        ["path", "salt mode", "attributed by", "requests", "imbalance", "unattributed",
         "repeats stayed", "tokens lost to routing", "misdirected / exposed",
         "misdirected by chance"], rows, keys=2))


def routed_isolation_table(iso: dict) -> Table:
    """Per routed cell: verdict, where A's repeat and B's probe landed, and the load."""
    rows = [[c["path"], c["modality"], c["verdict"],
             _share(c["affinity"]["with_prime"], c["affinity"]["of"]),
             _share(c["misdirected"]["with_prime"], c["misdirected"]["of"]),
             " / ".join(f"{k} {v}" for k, v in sorted(c["load"].items())), c.get("reason") or ""]
            for c in iso["routed"]]
    return Table("Isolation through the router (prime salt A, probe salt B, then A again)",
                 ["path", "modality", "verdict", "A again stayed with A", "B sent to A's replica",
                  "requests per replica", "reason"], rows, keys=2, text=2)


def replica_tables(results: dict, isolation: dict | None = None) -> list[Table]:
    """Every replica table a run (and its isolation) has; none for a single server."""
    shown = [replica_table(results), routing_table(results)] if results.get("replicas") else []
    if isolation and isolation.get("routed"):
        shown.append(routed_isolation_table(isolation))
    return shown
