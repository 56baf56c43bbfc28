"""The same workload through vllm-router under several policies, on one set of replicas.

The replicas start once; per policy a router starts in front of them (prefix caches reset
first, so every policy begins cold), the workload runs through it into its own run
directory, and the router stops. The comparison is one row per policy x path x salt mode:
hit rate, TTFT, throughput, load imbalance, routing affinity, misdirection, leaks, and
what salting costs in hit rate under that policy. ``policies.json`` is rewritten after
every policy; a policy whose router cannot start is ``n/a`` with the reason.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from bench import SCHEMA_VERSION
from bench.docio import write_json, write_text
from bench.engine.replicas import ReplicaSet, routed
from bench.engine.router import kv_decisions
from bench.errors import BenchError
from bench.metrics import group_by
from bench.outputs import new_run_id
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.verdicts.runs import problems
from bench.workload import Workload

POLICIES_FILE, POLICIES_KIND, POLICIES_MD = "policies.json", "saltbench-policies", "policies.md"


def reset_prefix_caches(replica_set: ReplicaSet, headers: dict[str, str]) -> None:
    """``POST /reset_prefix_cache`` on every replica (managed replicas run in dev mode)."""
    for server in replica_set.servers:
        request = urllib.request.Request(f"{server.base_url}/reset_prefix_cache", data=b"",
                                         headers=headers, method="POST")
        try:
            urllib.request.urlopen(request, timeout=60).close()
        except (urllib.error.URLError, OSError) as exc:
            raise BenchError(f"{server.base_url}/reset_prefix_cache: {exc}") from None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def policy_rows(policy: str, results: dict) -> list[dict]:
    """One row per path x salt mode of a policy's run (repetitions pooled)."""
    routing = {(g["path"], g["salt_mode"]): g
               for g in (results.get("replicas") or {}).get("groups", [])}
    rows = []
    for (path, mode), passes in group_by(results["passes"], ("path", "salt_mode")).items():
        r = routing.get((path, mode), {})
        cached = sum(p["cached_tokens"] or 0 for p in passes)
        prompt = sum(p["prompt_tokens"] or 0 for p in passes)
        rows.append({
            "policy": policy, "path": path, "salt_mode": mode,
            "requests": sum(p["completed"] + p["failed"] for p in passes),
            "hit_rate": _ratio(cached, prompt),
            "counters_agree": all(p.get("counters_agree") for p in passes),
            "median_ttft_ms": _mean([p["median_ttft_ms"] for p in passes]),
            "p99_ttft_ms": _mean([p["p99_ttft_ms"] for p in passes]),
            "request_throughput": _mean([p["request_throughput"] for p in passes]),
            "imbalance": r.get("imbalance"), "affinity": r.get("affinity"),
            "lost_tokens": r.get("lost_tokens"), "misdirected": r.get("misdirected"),
            "exposed": r.get("exposed"), "misdirected_share": r.get("misdirected_share"),
            "misdirected_by_chance": r.get("misdirected_by_chance"),
            "leaked_tokens": sum(p.get("leaked_tokens") or 0 for p in passes)})
    unsalted = {row["path"]: row["hit_rate"] for row in rows if row["salt_mode"] == "none"}
    for row in rows:
        none = unsalted.get(row["path"])
        row["salt_cost_pp"] = (100 * (none - row["hit_rate"]) if row["salt_mode"] == "salted"
                               and none is not None and row["hit_rate"] is not None else None)
    return rows


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def run_policies(replica_set: ReplicaSet, policies: list[str], workload: Workload,
                 opts: RunOptions, out: Path, console: Console,
                 render: Callable[[dict], str], api_key: str | None = None) -> dict:
    """Every policy in turn on ``replica_set``; write ``policies.json`` and ``.md``."""
    doc: dict = {"schema_version": SCHEMA_VERSION, "kind": POLICIES_KIND,
                 "workload": workload.metadata["spec"], "replicas_start_s":
                 round(replica_set.start_s, 1), "replicas": replica_set.metadata(),
                 "policies": [], "rows": []}

    def save() -> None:
        write_json(out / POLICIES_FILE, doc)
        write_text(out / POLICIES_MD, render(doc))

    for policy in policies:
        console.rule(policy)
        entry: dict = {"policy": policy, "dir": str(out / policy)}
        started = time.monotonic()
        try:
            reset_prefix_caches(replica_set, {"Authorization": f"Bearer {api_key}"}
                                if api_key else {})
            with routed(replica_set, policy, console, api_key) as target:
                results = run_benchmark(target, workload, opts, out / policy,
                                        new_run_id(policy), console)
                router = target.metadata["router"]
                entry.update(status="ok", router_start_s=router["start_s"],
                             router_rss_mib=router["rss_mib"],
                             unavailable=results["unavailable"], problems=problems(results),
                             kv_decisions=kv_decisions(Path(router["log"])))
            doc["rows"] += policy_rows(policy, results)
        except BenchError as exc:
            entry.update(status="n/a", error=str(exc))
            console.print(f"[red]{policy}: {exc}[/]")
        entry["duration_s"] = round(time.monotonic() - started, 1)
        doc["policies"].append(entry)
        save()
    doc["replicas_after"] = replica_set.metadata()
    doc["exit_code"] = (2 if any(e["status"] != "ok" for e in doc["policies"])
                        else 1 if any(e["problems"] for e in doc["policies"]) else 0)
    save()
    return doc
