"""The report's tables as formatted cells, and the Markdown summary (PR comment, step summary).

The HTML page renders the same :class:`Table` objects, so both agree on every number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.report.load import Run
from bench.report.style import fmt, ms, rate, tput

AGREE = {True: "yes", False: "NO", None: "–"}


@dataclass
class Table:
    """A titled table of display strings; the first ``keys`` columns are labels."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    keys: int = 1


def _p(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def pass_table(run: Run) -> Table:
    """Per pass: hit rates from requests and counters, TTFT of hits and misses, throughput."""
    rows = []
    for p in run.results["passes"]:
        recs = [r for r in run.records if r.get("pass") == p["index"] and r.get("ok")]
        hits = [r["ttft_ms"] for r in recs if r.get("cached_tokens")]
        misses = [r["ttft_ms"] for r in recs if not r.get("cached_tokens")]
        rows.append([p["path"], p["salt_mode"], f"{p.get('completed')}/{p.get('failed')}",
                     rate(p.get("hit_rate_requests")), rate(p.get("hit_rate_counters")),
                     AGREE[p.get("counters_agree")], ms(p.get("median_ttft_ms")),
                     ms(p.get("p99_ttft_ms")), ms(_p(hits, 50)), ms(_p(misses, 50)),
                     tput(p.get("request_throughput")), tput(p.get("total_token_throughput"))])
    return Table("Per pass (measure phase)",
                 ["path", "salt mode", "ok/failed", "hit rate (requests)", "hit rate (counters)",
                  "counters agree", "TTFT p50 ms", "TTFT p99 ms", "TTFT hit p50 ms",
                  "TTFT miss p50 ms", "req/s", "tok/s"], rows, keys=2)


def group_table(run: Run) -> Table:
    rows = [[g["path"], g["modality"], g["salt_mode"], f"{g.get('completed')}/{g.get('failed')}",
             rate(g.get("hit_rate")), rate(g.get("hit_fraction_of_expected")),
             ms(g.get("median_ttft_ms")), ms(g.get("p99_ttft_ms")), ms(g.get("mean_tpot_ms")),
             ms(g.get("median_e2el_ms")), tput(g.get("request_throughput")),
             tput(g.get("total_token_throughput"))] for g in run.results["groups"]]
    return Table("Per path, modality and salt mode (measure phase; throughput is the group's "
                 "share)", ["path", "modality", "salt mode", "ok/failed", "hit rate",
                            "cached / expected", "TTFT p50 ms", "TTFT p99 ms", "TPOT mean ms",
                            "E2EL p50 ms", "req/s", "tok/s"], rows, keys=3)


def expectations_line(run: Run) -> str:
    exp = run.results.get("expectations", {})
    partial = "INTERRUPTED run, results are partial; " if run.results.get("interrupted") else ""
    return (f"{partial}cache expectations met: {exp.get('met', '–')}/{exp.get('checked', '–')}; "
            f"prompt-token mismatches between paths: "
            f"{len(run.results.get('prompt_token_mismatches', []))}")


def unmet_table(run: Run) -> Table:
    cols = ("phase", "path", "salt_mode", "request_id", "modality", "expect", "prompt_tokens",
            "cached_tokens", "expected_cached_tokens")
    rows = [[fmt(u.get(c), "") for c in cols]
            for u in run.results.get("expectations", {}).get("unmet", [])]
    return Table("Unmet cache expectations", [c.replace("_", " ") for c in cols], rows, keys=6)


def verdict_table(iso: dict) -> Table:
    rows = [[c["path"], c["modality"], c["verdict"], c.get("reason") or "",
             str(c.get("leaked_tokens") or 0)] for c in iso["cells"]]
    return Table("Isolation verdicts", ["path", "modality", "verdict", "reason",
                                        "leaked tokens"], rows, keys=4)


def side_channel_table(iso: dict) -> Table:
    rows = [[s["path"], s["modality"], s["kind"], rate(s["auc"]),
             f"{rate(s['ci_low'])}–{rate(s['ci_high'])}", f"{s.get('n_a')}/{s.get('n_b')}",
             "yes" if s.get("distinguishable") else "no"] for s in iso.get("side_channel", [])]
    return Table("Timing side channel (AUC of TTFT)", ["path", "modality", "kind", "AUC",
                                                      "CI", "n a/b", "distinguishable"],
                 rows, keys=3)


def uuid_table(iso: dict) -> Table:
    rows = [[u["path"], u.get("finding") or "", str(u.get("same_salt_cached_tokens")),
             str(u.get("cross_salt_cached_tokens")), str(u.get("mm_cache_hits"))]
            for u in iso.get("uuid_probe", [])]
    return Table("Media UUID probe", ["path", "finding", "same-salt cached tokens",
                                      "cross-salt cached tokens", "mm cache hits"], rows, keys=2)


def meta_line(run: Run) -> str:
    return " · ".join(f"{k} **{v}**" for k, v in run.meta().items())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table) -> str:
    align = [":--"] * table.keys + ["--:"] * (len(table.headers) - table.keys)
    lines = [table.headers, align, *table.rows]
    return "\n".join("| " + " | ".join(_cell(c) for c in line) + " |" for line in lines)


def summary(runs: list[Run]) -> str:
    """The Markdown summary: per run, its metadata, per-pass table and verdicts."""
    parts = ["## saltbench report"]
    for run in runs:
        parts += [f"### {run.label}", meta_line(run), to_markdown(pass_table(run)),
                  expectations_line(run)]
        if run.isolation:
            parts.append(to_markdown(verdict_table(run.isolation)))
    return "\n\n".join(parts) + "\n"
