"""Compare two sides (a run, or a set of runs each on its own server start): every headline
metric per path x modality x salt mode, judged, isolation, the problems of every run, the
exit code.

The metric rows are paired when both sides are the sides of one A/B
(:mod:`bench.compare.ab_rows`), else unpaired, over server starts
(:mod:`bench.compare.unpaired`). Leaked tokens must stay 0, and with
``isolation = "must-hold"`` every isolation cell the new side probed must be ISOLATED, judged
on its worst verdict across the side's runs (a cell a server cannot serve is ``n/a``; one the
new side did not probe, or whose probe failed, is inconclusive). The media-content channel
(uuid probe) is judged as a change, gated when ``isolation_fail_on`` names it: content
substituted now but not in the base side is lost.

The gate fails closed. Exit 1: a run of the new side has problems
(:func:`bench.verdicts.runs.problems`: failed requests, leaks, under-hits, counters that
disagree, an interruption...), a gated metric regressed or an isolation cell leaks or
under-hits. Else exit 2: a run of the base side has problems (the comparison cannot be
trusted) or a gated row is inconclusive (unless ``inconclusive = "report"`` /
``--allow-inconclusive``). Else 0.
"""

from __future__ import annotations

from bench import SCHEMA_VERSION
from bench.compare.ab_rows import ab_rows
from bench.compare.samples import Side, paired
from bench.compare.thresholds import REPORT, Thresholds
from bench.compare.unpaired import unpaired_rows
from bench.outputs import COMPARE_KIND
from bench.registry import METRICS, POINTS
from bench.verdicts.runs import problems
from bench.vocab import (
    CONTENT,
    ERROR,
    IMPROVED,
    INCONCLUSIVE,
    ISOLATED,
    NO_CHANGE,
    NOT_AVAILABLE,
    REGRESSED,
    SUBSTITUTED,
)


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
    """Every judged KV entry by (path, what): cells by modality, then cells through the
    router and uuid probes, labelled as such."""
    iso = run.isolation or {}
    out = {(c["path"], _on(c["modality"], c)): c for c in iso.get("cells", [])}
    out.update({(c["path"], f"{c['modality']} (routed)"): c for c in iso.get("routed", [])})
    out.update({(c["path"], _on(f"{c.get('modality', 'image')} uuid probe", c)): c
                for c in iso.get("uuid_probe", [])})
    return out


def _on(what: str, entry: dict) -> str:
    """``what``, and the replica it was probed on behind a router (``image @r1``)."""
    return what + (f" @{entry['replica']}" if entry.get("replica") else "")


def _content(base: Side, new: Side, gated: bool) -> list[dict]:
    """Per uuid probe of the new side, the media-content channel judged as a change: lost
    (ISOLATED in the base side, SUBSTITUTED now) is REGRESSED; SUBSTITUTED in both is no
    change (the isolation run's own verdict and exit code say it is open); a failed or
    missing probe is inconclusive."""
    def content(side: Side) -> dict[tuple[str, str], dict]:
        return {(u["path"], _on(f"{u.get('modality', 'image')} media content", u)): u
                for u in (side.isolation or {}).get("uuid_probe", []) if "content" in u}

    before, after = content(base), content(new)
    rows = []
    for key, n in after.items():
        b = before.get(key)
        was, now = b and b["content"], n["content"]
        if now == ERROR or b is None or was == ERROR:
            state, reason = INCONCLUSIVE, n.get("content_reason") or "not probed in the base run"
        elif now == SUBSTITUTED:
            state, reason = ((NO_CHANGE, "SUBSTITUTED in both runs") if was == SUBSTITUTED
                             else (REGRESSED, f"{n['content_reason']} (lost)"))
        else:
            state, reason = (NO_CHANGE, "") if was == now else (IMPROVED, "isolated now")
        rows.append({"path": key[0], "modality": key[1], "base": was, "new": now,
                     "state": state, "reason": reason, "gated": gated})
    return rows


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
    ab = paired(base, new)
    # a metric neither side has (goodput without objectives) gets no rows
    metrics = [m for m in METRICS.values() if base.measured(m) or new.measured(m)]
    rows = (ab_rows(base, new, thresholds, metrics) if ab
            else unpaired_rows(base, new, thresholds, metrics))
    isolation = [*_isolation(base, new, settings.isolation),
                 *_content(base, new, settings.isolation == "must-hold"
                           and CONTENT in settings.isolation_fail_on)]
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
                     "interval": ("paired over units of an A/B, t over start pairs, "
                                  "Bonferroni over gated rows") if ab else
                     "Welch t over server starts"},
        "ab": base.ab_id if ab else None,
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
