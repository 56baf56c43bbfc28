"""Compare two sides (a run, or a set of runs each on its own server start): every headline
metric per path x modality x salt mode, judged.

Each metric's change has a t interval over server starts (:mod:`bench.compare.intervals`).
It **regressed** when its interval excludes no change on the bad side AND the change
passes the threshold (**improved**: the same, the other way); it shows **no significant
change** only when the interval rules out a regression beyond the threshold (its bad end
is within it); anything else is **inconclusive**, with the reason (one server start on a
side, or how far the interval reaches and about how many starts would settle it).
Leaked tokens must stay 0, and with ``isolation = "must-hold"`` every isolation cell the
new side probed must be ISOLATED, judged on its worst verdict across the side's runs (a
cell a server cannot serve is ``n/a``; one the new side did not probe, or whose probe
failed, is inconclusive).

The gate fails closed. Exit 1: a run of the new side has problems
(:func:`bench.verdicts.runs.problems`: failed requests, leaks, under-hits, counters that
disagree, an interruption...), a gated metric regressed or an isolation cell leaks or
under-hits. Else exit 2: a run of the base side has problems (the comparison cannot be
trusted) or a gated row is inconclusive (unless ``inconclusive = "report"`` /
``--allow-inconclusive``). Else 0.
"""

from __future__ import annotations

from bench import SCHEMA_VERSION
from bench.compare.intervals import MAX_STARTS, MIN_STARTS, Estimate, estimate, scale, starts_needed
from bench.compare.samples import Side
from bench.compare.thresholds import REPORT, Settings, Thresholds, format_threshold
from bench.outputs import COMPARE_KIND
from bench.registry import METRICS, POINTS, ZERO, Metric
from bench.verdicts.runs import problems
from bench.vocab import (
    ERROR,
    IMPROVED,
    INCONCLUSIVE,
    ISOLATED,
    NO_CHANGE,
    NOT_AVAILABLE,
    REGRESSED,
)


def _fmt(metric: Metric, value: float) -> str:
    return f"{value:+.1f}pp" if metric.change == POINTS else f"{value:+.0%}"


def _needed(metric: Metric, est: Estimate, limit: float) -> float:
    """How far the interval's half width must shrink (on its scale) to decide, were the
    change to stay as it is: below the distance of the change from no change (it is
    beyond the threshold) or from the threshold (it is within)."""
    assert est.change is not None
    p = metric.worse(scale(metric, est.change))  # on the interval's scale, positive is worse
    lim = metric.worse(scale(metric, metric.worse(limit)))
    return p if p > lim else lim - p


def _more(k: int | None, spread: str) -> str:
    return (f"about {k} runs (server starts) per side would decide at {spread}" if k else
            f"more than {MAX_STARTS} server starts per side would be needed at {spread} (a "
            f"change this close to the threshold)")


def _underpowered(metric: Metric, est: Estimate, limit: float, settings: Settings) -> str:
    """Why an interval cannot decide, how far it reaches and about how many server starts
    per side would decide at this spread (were the change to stay as it is)."""
    assert est.change is not None and est.low is not None and est.high is not None
    bad = max(est.low, est.high, key=metric.worse)
    good = min(est.low, est.high, key=metric.worse)
    if metric.worse(scale(metric, est.change)) > metric.worse(scale(metric, metric.worse(limit))):
        why = f"interval reaches {_fmt(metric, good)} (includes no change)"
    else:
        why = f"interval reaches {_fmt(metric, bad)} (threshold {format_threshold(metric, limit)})"
    k = starts_needed(_needed(metric, est, limit), est.sd_base or 0.0, est.sd_new or 0.0,
                      settings.confidence)
    return (f"{why}: underpowered with {est.n_base} vs {est.n_new} server starts; "
            f"{_more(k, 'this spread')}")


def _one_start(metric: Metric, est: Estimate, limit: float, settings: Settings) -> str:
    """Why a side with one server start cannot decide, and what would: a set of runs per
    side (about how many, when a side with several starts shows their spread)."""
    where = ("per side" if max(est.n_base, est.n_new) < MIN_STARTS else
             f"on the {'base' if est.n_base < MIN_STARTS else 'new'} side")
    why = (f"{est.n_base} vs {est.n_new} server start(s): one server start {where} cannot "
           f"separate a change from the start-to-start spread (each start shifts timings by "
           f"its own offset); compare sets of runs, each run on its own server start")
    sd = est.sd_base if est.sd_base is not None else est.sd_new
    if sd is None:
        return f"{why} (e.g. 3 per side: compare runs/base runs/new)"
    k = starts_needed(_needed(metric, est, limit), sd, sd, settings.confidence)
    side = "base" if est.sd_base is not None else "new"
    return f"{why}: {_more(k, f'the {side} side’s start-to-start spread')}"


def judge(metric: Metric, est: Estimate, threshold: float | None, settings: Settings
          ) -> tuple[str, str]:
    """(state, reason) of one metric in one group; ``threshold`` None: not gated (the state
    then says only whether the interval excludes no change)."""
    if metric.better == ZERO:
        if est.new is None:
            return INCONCLUSIVE, "no value in the new run"
        if est.new > 0:
            return REGRESSED, f"{est.new:g} {metric.unit} in the new run (must be 0)"
        return (IMPROVED, "0 now") if (est.base or 0) > 0 else (NO_CHANGE, "0 in both")
    if est.base is None and est.new is None:
        return NOT_AVAILABLE, "no value in either run"
    if est.base is None or est.new is None:
        return INCONCLUSIVE, f"no value in the {'base' if est.base is None else 'new'} run"
    limit = 0.0 if threshold is None else threshold
    if est.change is None or est.low is None or est.high is None:
        return INCONCLUSIVE, _one_start(metric, est, limit, settings)
    worse_low, worse_high = sorted((metric.worse(est.low), metric.worse(est.high)))
    exact = est.low == est.high
    change = metric.worse(est.change)
    what = "exact: every repetition of each side gave one value" if exact else \
        "interval excludes no change"
    if worse_low > 0 and change > limit:
        return REGRESSED, f"worse beyond the threshold, {what}"
    if worse_high < 0 and -change > limit:
        return IMPROVED, f"better beyond the threshold, {what}"
    if threshold is None:
        return NO_CHANGE, "interval includes no change (not gated)"
    if worse_high <= limit:
        if exact:
            return NO_CHANGE, ("the same in every repetition" if change == 0 else
                               "an exact change within the threshold")
        return NO_CHANGE, "interval rules out a regression beyond the threshold"
    return INCONCLUSIVE, _underpowered(metric, est, limit, settings)


def _side(side: Side) -> dict:
    """What compare.json says of a side: its runs (server starts), repetitions and problems,
    each problem naming its run directory."""
    runs = [{"dir": str(r.dir), "run_id": r.results["run_id"],
             "date": r.results["metadata"].get("date"),
             "repetitions": len({p.get("repetition", 0) for p in r.results["passes"]}),
             "interrupted": r.results["interrupted"], "problems": problems(r.results)}
            for r in side.runs]
    return {"dir": str(side.dir), "label": side.label,
            "vllm_version": side.results["metadata"].get("target", {}).get("vllm_version"),
            "run_dirs": [r["dir"] for r in runs], "run_ids": [r["run_id"] for r in runs],
            "starts": len(runs), "repetitions": sum(r["repetitions"] for r in runs),
            "interrupted": any(r["interrupted"] for r in runs),
            "unavailable": side.unavailable, "runs": runs,
            "problems": [f"{r['dir']}: {p}" for r in runs for p in r["problems"]]}


def _metric_rows(base: Side, new: Side, thresholds: Thresholds) -> list[dict]:
    rows = []
    settings = thresholds.settings
    for key in [k for k in base.groups if k in new.groups]:
        for metric in METRICS.values():
            threshold = thresholds.threshold(metric.name, key)
            est = estimate(metric, base.groups[key], new.groups[key], level=settings.confidence,
                           min_requests=settings.min_requests)
            state, reason = judge(metric, est, threshold, settings)
            rows.append({"path": key[0], "modality": key[1], "salt_mode": key[2],
                         "metric": metric.name, "unit": metric.unit, "better": metric.better,
                         "change_unit": metric.change, "base": est.base, "new": est.new,
                         "change": est.change, "low": est.low, "high": est.high,
                         "n_base": est.n_base, "n_new": est.n_new,
                         "reps_base": est.reps_base, "reps_new": est.reps_new,
                         "threshold": format_threshold(metric, threshold),
                         "gated": threshold is not None, "state": state, "reason": reason})
    return rows


def _missing_groups(base: Side, new: Side) -> list[dict]:
    """Groups only one side has: ``n/a`` with the reason, never silently dropped."""
    rows = []
    for side, have, other in (("new", base, new), ("base", new, base)):
        for key in [k for k in have.groups if k not in other.groups]:
            reason = other.unavailable.get(key[0]) or "not in that run"
            rows.append({"path": key[0], "modality": key[1], "salt_mode": key[2],
                         "missing_in": side, "state": NOT_AVAILABLE, "reason": reason})
    return rows


def _cells(run: Side) -> dict[tuple[str, str], dict]:
    """Every judged isolation entry by (path, what): cells by modality, then cells through
    the router and uuid probes, labelled as such."""
    iso = run.isolation or {}
    out = {(c["path"], c["modality"]): c for c in iso.get("cells", [])}
    out.update({(c["path"], f"{c['modality']} (routed)"): c for c in iso.get("routed", [])})
    out.update({(c["path"], "uuid probe"): c for c in iso.get("uuid_probe", [])})
    return out


def _unprobed(run: Side, side: str) -> tuple[str, str]:
    """(state, reason) of a cell ``run`` (the ``side`` run) lacks: the new run must have
    probed what the base run did (inconclusive), else the cell is n/a."""
    isolation = run.isolation
    if isolation is None:
        why = f"no isolation.json in the {side} run"
    elif not isolation["complete"]:
        why = f"not probed yet in the {side} run (isolation incomplete)"
    else:
        return NOT_AVAILABLE, f"not probed in the {side} run"
    return (INCONCLUSIVE if side == "new" else NOT_AVAILABLE), why


def _isolation(base: Side, new: Side, rule: str) -> list[dict]:
    """Per cell of either run: n/a (a side cannot serve it, or the base run did not probe
    it), INCONCLUSIVE (the new run did not probe it, or its probe failed: ERROR),
    REGRESSED (the new run leaks or under-hits, whatever the base run said), IMPROVED
    (isolated now) or NO_CHANGE (isolated in both)."""
    cells = {"base": _cells(base), "new": _cells(new)}
    rows = []
    for key in dict.fromkeys([*cells["base"], *cells["new"]]):
        b, n = cells["base"].get(key), cells["new"].get(key)
        if n is not None and n["leaked_tokens"]:
            state, reason = REGRESSED, n.get("reason") or n["verdict"]
        elif b is None or n is None:
            state, reason = _unprobed(base, "base") if b is None else _unprobed(new, "new")
        elif NOT_AVAILABLE in (b["verdict"], n["verdict"]):
            side, cell = ("new", n) if n["verdict"] == NOT_AVAILABLE else ("base", b)
            state, reason = NOT_AVAILABLE, f"not served in the {side} run: {cell.get('reason')}"
        elif n["verdict"] == ISOLATED:
            state, reason = ((NO_CHANGE, "") if b["verdict"] == ISOLATED
                             else (IMPROVED, "isolated now"))
        elif n["verdict"] == ERROR:
            state, reason = INCONCLUSIVE, f"the new run's probe failed: {n.get('reason')}"
        else:
            was = "lost" if b["verdict"] == ISOLATED else f"as in the base run ({b['verdict']})"
            state, reason = REGRESSED, f"{n.get('reason') or n['verdict']} ({was})"
        rows.append({"path": key[0], "modality": key[1],
                     "base": b and b["verdict"], "new": n and n["verdict"],
                     "state": state, "reason": reason, "gated": rule == "must-hold"})
    return rows


def exit_code(doc: dict) -> int:
    """1: problems in the new run, or a gated regression or isolation loss; else 2: problems
    in the base run, or a gated inconclusive row (unless they are only reported); else 0."""
    s = doc["summary"]
    if s["gate failures"]:
        return 1
    return 2 if s["cannot judge"] else 0


def compare_runs(base: Side, new: Side, thresholds: Thresholds,
                 allowed: dict[str, tuple[object, object]]) -> dict:
    """The comparison document (``kind`` saltbench-compare) with its exit code."""
    settings = thresholds.settings
    rows = _metric_rows(base, new, thresholds)
    isolation = _isolation(base, new, settings.isolation)
    sides = {"base": _side(base), "new": _side(new)}
    gated = [r for r in [*rows, *isolation] if r["gated"]]
    unsure = [r for r in gated if r["state"] == INCONCLUSIVE]
    summary = {state: sum(r["state"] == state for r in rows)
               for state in (REGRESSED, IMPROVED, NO_CHANGE, INCONCLUSIVE)}
    summary.update({
        "isolation lost": sum(r["state"] == REGRESSED for r in isolation),
        "gated inconclusive": len(unsure),
        "new run problems": len(sides["new"]["problems"]),
        "base run problems": len(sides["base"]["problems"]),
        "gate failures": (sum(r["state"] == REGRESSED for r in gated)
                          + len(sides["new"]["problems"])),
        "cannot judge": ((0 if settings.inconclusive == REPORT else len(unsure))
                         + len(sides["base"]["problems"])),
    })
    doc = {
        "schema_version": SCHEMA_VERSION, "kind": COMPARE_KIND, **sides,
        "allowed_differences": {k: list(v) for k, v in allowed.items()},
        "settings": {**vars(settings), "thresholds": thresholds.source,
                     "interval": "Welch t over server starts"},
        "rows": rows, "missing": _missing_groups(base, new), "isolation": isolation,
        "summary": summary,
    }
    doc["exit_code"] = exit_code(doc)
    return doc


def format_change(row: dict) -> str:
    """``+12.3% [+4.0, +20.1]`` or ``-1.5pp [...]``, without the interval when there is
    none; empty when there is no change."""
    if row.get("change") is None:
        return ""
    points = row["change_unit"] == POINTS
    text = f"{row['change']:+.1f}pp" if points else f"{row['change']:+.1%}"
    if row.get("low") is None:
        return text
    k = 1 if points else 100
    return f"{text} [{row['low'] * k:+.1f}, {row['high'] * k:+.1f}]"
