"""Compare two runs: every headline metric per path x modality x salt mode, judged.

A metric **regressed** only when its interval excludes no change AND its change passes
the threshold in the bad direction (**improved**: the same, the other way). Too few
samples or a spread across repetitions over the limit make it **inconclusive**;
everything else is **no significant change**. Leaked tokens must stay 0, and with
``isolation = "must-hold"`` a cell that was ISOLATED must stay ISOLATED.
"""

from __future__ import annotations

import zlib

from bench import SCHEMA_VERSION
from bench.compare.bootstrap import Estimate, estimate
from bench.compare.samples import GroupKey, RunSamples
from bench.compare.thresholds import Settings, Thresholds, format_threshold
from bench.outputs import COMPARE_KIND
from bench.registry import METRICS, POINTS, ZERO, Metric
from bench.vocab import (
    IMPROVED,
    INCONCLUSIVE,
    ISOLATED,
    NO_CHANGE,
    NOT_AVAILABLE,
    REGRESSED,
)


def judge(metric: Metric, est: Estimate, threshold: float | None, settings: Settings,
          cv: float | None) -> tuple[str, str]:
    """(state, reason) of one metric in one group."""
    if metric.better == ZERO:
        if est.new is None:
            return INCONCLUSIVE, "no value in the new run"
        if est.new > 0:
            return REGRESSED, f"{est.new:g} {metric.unit} in the new run (must be 0)"
        return (IMPROVED, "0 now") if (est.base or 0) > 0 else (NO_CHANGE, "0 in both")
    if est.change is None or est.low is None or est.high is None:
        return INCONCLUSIVE, "no value on one side"
    need = settings.min_requests if metric.per_request else settings.min_repetitions
    if min(est.n_base, est.n_new) < need:
        what = "requests" if metric.per_request else "repetitions (run with --repeat)"
        return INCONCLUSIVE, f"too few samples: {est.n_base} vs {est.n_new} {what}, need {need}"
    if cv is not None and cv > settings.max_cv:
        return INCONCLUSIVE, f"spread across repetitions {cv:.0%} > {settings.max_cv:.0%}"
    worse_low, worse_high = sorted((metric.worse(est.low), metric.worse(est.high)))
    limit = threshold or 0.0
    if worse_low > 0 and metric.worse(est.change) > limit:
        return REGRESSED, "worse beyond the threshold, interval excludes no change"
    if worse_high < 0 and -metric.worse(est.change) > limit:
        return IMPROVED, "better beyond the threshold, interval excludes no change"
    if worse_low > 0 or worse_high < 0:
        return NO_CHANGE, "a significant change within the threshold"
    return NO_CHANGE, "the interval includes no change"


def _cv(run: RunSamples, key: GroupKey, metric: str) -> float | None:
    for row in run.results.get("spread", []):
        if (row["path"], row["modality"], row["salt_mode"]) == key:
            return (row["metrics"].get(metric) or {}).get("cv")
    return None


def _side(run: RunSamples) -> dict:
    meta = run.results["metadata"]
    reps = {p.get("repetition", 0) for p in run.results["passes"]}
    return {"dir": str(run.dir), "run_id": run.results["run_id"], "label": run.label,
            "vllm_version": meta.get("target", {}).get("vllm_version"),
            "date": meta.get("date"), "repetitions": len(reps),
            "interrupted": run.results["interrupted"],
            "unavailable": run.results.get("unavailable", {})}


def _metric_rows(base: RunSamples, new: RunSamples, thresholds: Thresholds) -> list[dict]:
    rows = []
    settings = thresholds.settings
    for key in [k for k in base.groups if k in new.groups]:
        for metric in METRICS.values():
            threshold = thresholds.threshold(metric.name, key)
            est = estimate(metric, base.groups[key], new.groups[key], level=settings.confidence,
                           resamples=settings.resamples,
                           seed=zlib.crc32(repr((key, metric.name)).encode()))
            cvs = [c for c in (_cv(base, key, metric.name), _cv(new, key, metric.name))
                   if c is not None]
            state, reason = judge(metric, est, threshold, settings, max(cvs, default=None))
            rows.append({"path": key[0], "modality": key[1], "salt_mode": key[2],
                         "metric": metric.name, "unit": metric.unit, "better": metric.better,
                         "change_unit": metric.change, "base": est.base, "new": est.new,
                         "change": est.change, "low": est.low, "high": est.high,
                         "n_base": est.n_base, "n_new": est.n_new,
                         "threshold": format_threshold(metric, threshold),
                         "gated": threshold is not None, "state": state, "reason": reason})
    return rows


def _missing_groups(base: RunSamples, new: RunSamples) -> list[dict]:
    """Groups only one side has: ``n/a`` with the reason, never silently dropped."""
    rows = []
    for side, have, other in (("new", base, new), ("base", new, base)):
        for key in [k for k in have.groups if k not in other.groups]:
            reason = other.results.get("unavailable", {}).get(key[0]) or "not in that run"
            rows.append({"path": key[0], "modality": key[1], "salt_mode": key[2],
                         "missing_in": side, "state": NOT_AVAILABLE, "reason": reason})
    return rows


def _isolation(base: RunSamples, new: RunSamples, rule: str) -> list[dict]:
    if base.isolation is None or new.isolation is None:
        return []
    cells = {s: {(c["path"], c["modality"]): c for c in run.isolation["cells"]}  # type: ignore[index]
             for s, run in (("base", base), ("new", new))}
    rows = []
    for key in dict.fromkeys([*cells["base"], *cells["new"]]):
        b, n = cells["base"].get(key), cells["new"].get(key)
        if b is None or n is None:
            side = base if b is None else new
            why = "probed" if side.isolation["complete"] else "probed yet (isolation incomplete)"  # type: ignore[index]
            state, reason = NOT_AVAILABLE, f"not {why} in the {'base' if b is None else 'new'} run"
        elif n["verdict"] != ISOLATED and (b["verdict"] == ISOLATED or n["leaked_tokens"]):
            state, reason = REGRESSED, n.get("reason") or n["verdict"]
        elif b["verdict"] != ISOLATED and n["verdict"] == ISOLATED:
            state, reason = IMPROVED, "isolated now"
        else:
            state, reason = NO_CHANGE, n.get("reason") or ""
        rows.append({"path": key[0], "modality": key[1],
                     "base": b and b["verdict"], "new": n and n["verdict"],
                     "state": state, "reason": reason, "gated": rule == "must-hold"})
    return rows


def compare_runs(base: RunSamples, new: RunSamples, thresholds: Thresholds,
                 allowed: dict[str, tuple[object, object]]) -> dict:
    """The comparison document (``kind`` saltbench-compare) with its exit code."""
    rows = _metric_rows(base, new, thresholds)
    isolation = _isolation(base, new, thresholds.settings.isolation)
    failing = [r for r in [*rows, *isolation] if r["gated"] and r["state"] == REGRESSED]
    summary = {state: sum(r["state"] == state for r in rows)
               for state in (REGRESSED, IMPROVED, NO_CHANGE, INCONCLUSIVE)}
    summary["isolation lost"] = sum(r["state"] == REGRESSED for r in isolation)
    summary["gate failures"] = len(failing)
    return {
        "schema_version": SCHEMA_VERSION, "kind": COMPARE_KIND,
        "base": _side(base), "new": _side(new),
        "allowed_differences": {k: list(v) for k, v in allowed.items()},
        "settings": {**vars(thresholds.settings), "thresholds": thresholds.source},
        "rows": rows, "missing": _missing_groups(base, new), "isolation": isolation,
        "summary": summary, "exit_code": 1 if failing else 0,
    }


def format_change(row: dict) -> str:
    """``+12.3% [+4.0, +20.1]`` or ``-1.5pp [...]``; empty when there is none."""
    if row.get("change") is None:
        return ""
    if row["change_unit"] == POINTS:
        return f"{row['change']:+.1f}pp [{row['low']:+.1f}, {row['high']:+.1f}]"
    return f"{row['change']:+.1%} [{row['low'] * 100:+.1f}, {row['high'] * 100:+.1f}]"
