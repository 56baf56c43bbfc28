"""The tables of a comparison (bench.compare), as :class:`bench.report.tables.Table` so that
the console, Markdown and HTML show the same strings."""

from __future__ import annotations

from bench.compare.pair import format_change
from bench.registry import METRICS, POINTS
from bench.report.tables import Table, fmt
from bench.vocab import CHANNELS, IMPROVED, INCONCLUSIVE, KV, NO_CHANGE, NOT_AVAILABLE, REGRESSED


def value(row: dict, key: str) -> str:
    """A metric value in its unit (rates as percentages)."""
    v = row.get(key)
    if v is None:
        return "–"
    return f"{v * 100:.1f}%" if row["change_unit"] == POINTS else fmt(v, ".4g")


#: The verdict of a comparison per exit code.
VERDICTS = {0: "PASS", 1: "FAIL", 2: "CANNOT JUDGE"}


def side_line(doc: dict, side: str) -> str:
    """``base: 3 run(s) (server starts), 6 repetition(s): <run ids> (vLLM <version>)``."""
    d = doc[side]
    version = f" (vLLM {d['vllm_version']})" if d.get("vllm_version") else ""
    return (f"{side}: {d['starts']} run(s) (server starts), {d['repetitions']} repetition(s)"
            f"{' (interrupted)' if d['interrupted'] else ''}: {', '.join(d['run_ids'])}{version}")


def summary_line(doc: dict) -> str:
    s = doc["summary"]
    return (f"{VERDICTS[doc['exit_code']]} (exit {doc['exit_code']}): {s['gate failures']} gate "
            f"failure(s) · problems: {s['new run problems']} in the new run(s), "
            f"{s['base run problems']} in the base run(s) · {s[REGRESSED]} regressed · "
            f"{s[IMPROVED]} improved · {s[NO_CHANGE]} {NO_CHANGE} · {s[INCONCLUSIVE]} "
            f"{INCONCLUSIVE} ({s['gated inconclusive']} gated) · isolation lost or failing in "
            f"{s['isolation lost']} cell(s)")


def changes_table(doc: dict, states: tuple[str, ...] | None = None, title: str = "") -> Table:
    """Metric rows (of ``states``, or all) with values, change and interval, and state."""
    level = doc["settings"]["confidence"]
    rows = [[r["path"], r["modality"], r["salt_mode"], METRICS[r["metric"]].label,
             value(r, "base"), value(r, "new"), format_change(r) or "–", r["threshold"],
             r["state"] + ("" if r["gated"] or r["state"] != REGRESSED else " (not gated)"),
             r["reason"]]
            for r in doc["rows"] if states is None or r["state"] in states]
    return Table(title or "Changes", ["path", "modality", "salt mode", "metric", "base", "new",
                                      f"change [{level:.0%} CI]", "threshold", "state", "why"],
                 rows, keys=4)


def problems_table(doc: dict) -> Table:
    """Problems of every run of either side (bench.verdicts.runs.problems, each naming its
    run directory) and what each does to the gate."""
    effect = {"new": "fails the gate (exit 1)", "base": "cannot judge (exit 2)"}
    rows = [[side, problem, effect[side]] for side in ("new", "base")
            for problem in doc[side].get("problems", [])]
    return Table("Problems in the runs", ["side", "run: problem", "effect"], rows, keys=1)


def isolation_table(doc: dict) -> Table:
    rows = [[r["path"], r["modality"], r["base"] or "–", r["new"] or "–", r["state"], r["reason"]]
            for r in doc["isolation"]]
    return Table("Isolation verdicts, base vs new", ["path", "modality", "base", "new", "state",
                                                     "why"], rows, keys=2)


def missing_table(doc: dict) -> Table:
    rows = [[r["path"], r["modality"], r["salt_mode"], r["missing_in"], r["reason"]]
            for r in doc["missing"]]
    return Table("Groups only one run has (n/a)", ["path", "modality", "salt mode", "missing in",
                                                   "reason"], rows, keys=3)


def decisive_table(doc: dict) -> Table:
    """Metrics that regressed or improved, and gated ones that are inconclusive (they fail
    the gate unless reported only; the others are listed with every metric)."""
    rows = [r for r in doc["rows"] if r["state"] in (REGRESSED, IMPROVED)
            or (r["state"] == INCONCLUSIVE and r["gated"])]
    return changes_table({**doc, "rows": rows},
                         title="Regressions, improvements and gated inconclusive metrics")


def headline_tables(doc: dict) -> list[Table]:
    """What a reader needs first: the runs' problems, what changed or could not be judged,
    isolation, and groups only one run has."""
    out = [problems_table(doc), decisive_table(doc)]
    if doc["isolation"]:
        out.append(isolation_table(doc))
    if doc["missing"]:
        out.append(missing_table(doc))
    return out


def matrix_engine_table(doc: dict) -> Table:
    """Per engine: did it run, how long its server took, what it lacks."""
    rows = [[e["engine"], e.get("vllm_version") or "–", e["status"],
             fmt(e.get("server_start_s"), ".0f"), ", ".join(e.get("flags_dropped") or []) or "–",
             "; ".join(f"{p}: {why}" for p, why in (e.get("unavailable") or {}).items()) or "–",
             e.get("error") or "; ".join(e.get("problems") or []) or "–"]
            for e in doc["engines"]]
    return Table("Engines", ["engine", "vLLM", "status", "server start s", "flags dropped",
                             "paths n/a", "problems"], rows)


def _verdict(engine: dict, cell: str, channel: str) -> str:
    """An engine's verdict of one channel of one cell (a matrix written before the boundary
    existed has the KV verdict only)."""
    boundary = engine.get("boundary")
    if boundary is not None:
        return boundary.get(cell, {}).get(channel, NOT_AVAILABLE)
    return (engine.get("isolation") or {}).get(cell, NOT_AVAILABLE) if channel == KV \
        else NOT_AVAILABLE


def matrix_isolation_table(doc: dict) -> Table:
    """The tenant boundary per path/modality and channel (rows) and engine (columns); rows
    no engine can carry (n/a everywhere) are left out."""
    engines = doc["engines"]
    cells = list(dict.fromkeys(c for e in engines for c in e.get("isolation") or {}))
    rows = []
    for cell in cells:
        for channel in CHANNELS:
            verdicts = [_verdict(e, cell, channel) for e in engines]
            if channel == KV or set(verdicts) != {NOT_AVAILABLE}:
                rows.append([*cell.split("/", 1), channel, *verdicts])
    return Table("Isolation verdict per engine (the tenant boundary, a row per channel)",
                 ["path", "modality", "channel", *(e["engine"] for e in engines)], rows, keys=3)


def matrix_comparison_table(doc: dict) -> Table:
    """Per adjacent pair: the comparison's summary."""
    rows = []
    for c in doc["comparisons"]:
        s = c.get("summary") or {}
        rows.append([c["base"], c["new"], str(c["exit_code"]),
                     *(str(s.get(k, "–")) for k in (REGRESSED, IMPROVED, NO_CHANGE, INCONCLUSIVE,
                                                    "isolation lost")),
                     c.get("error") or c["dir"]])
    return Table("Adjacent engines compared", ["base", "new", "exit", REGRESSED, IMPROVED,
                                               NO_CHANGE, INCONCLUSIVE, "isolation lost",
                                               "details"], rows, keys=2)


def matrix_tables(doc: dict) -> list[Table]:
    return [matrix_engine_table(doc), matrix_isolation_table(doc), matrix_comparison_table(doc)]
