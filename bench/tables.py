"""Console tables of a run's results (rich)."""

from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.table import Table


def report_console() -> Console:
    """Standard output; wide enough for the tables when it is not a terminal (logs, CI)."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "–" if value is None else format(value, spec)


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def pass_table(results: dict, records: list[dict]) -> Table:
    """Per pass: hit rates from requests and counters, TTFT of hits and misses, throughput."""
    table = Table(title="Per path and salt mode (measure phase)")
    for col in ("path", "salt", "ok/failed", "hit rate req", "hit rate ctr", "agree",
                "TTFT hit p50/p99 ms", "TTFT miss p50/p99 ms", "req/s", "tok/s"):
        table.add_column(col, justify="left" if col in ("path", "salt") else "right")
    for p in results["passes"]:
        recs = [r for r in records if r["phase"] == "measure" and r["pass"] == p["index"]
                and r["ok"]]
        hits = [r["ttft_ms"] for r in recs if r["cached_tokens"]]
        misses = [r["ttft_ms"] for r in recs if not r["cached_tokens"]]
        table.add_row(
            p["path"], p["salt_mode"], f"{p['completed']}/{p['failed']}",
            _fmt(p["hit_rate_requests"], ".3f"), _fmt(p["hit_rate_counters"], ".3f"),
            {True: "yes", False: "[red]NO[/]", None: "–"}[p["counters_agree"]],
            f"{_fmt(_pct(hits, 50))}/{_fmt(_pct(hits, 99))}",
            f"{_fmt(_pct(misses, 50))}/{_fmt(_pct(misses, 99))}",
            _fmt(p["request_throughput"], ".2f"), _fmt(p["total_token_throughput"], ".0f"))
    return table


def print_summary(results: dict, records: list[dict], console: Console) -> None:
    console.print(pass_table(results, records))
    exp = results["expectations"]
    colour = "green" if not exp["unmet"] else "red"
    console.print(f"[{colour}]cache expectations met: {exp['met']}/{exp['checked']}[/]")
    for miss in exp["unmet"][:10]:
        console.print(f"  unmet: {miss}")
    for mm in results["prompt_token_mismatches"][:10]:
        console.print(f"[yellow]prompt token counts differ between paths: {mm}[/]")


VERDICT_STYLE = {"ISOLATED": "green", "LEAK": "bold red", "UNDER-HIT": "yellow", "ERROR": "magenta"}


def verdict_table(isolation: dict) -> Table:
    """Path x modality verdicts, with leaked tokens and the reason where not isolated."""
    table = Table(title="cache_salt isolation verdicts")
    for col in ("path", "modality", "verdict", "leaked tokens", "counters agree", "reason"):
        table.add_column(col)
    for c in isolation["cells"]:
        style = VERDICT_STYLE[c["verdict"]]
        table.add_row(c["path"], c["modality"], f"[{style}]{c['verdict']}[/]",
                      str(c["leaked_tokens"]), "yes" if c["counters"]["agree"] else "[red]NO[/]",
                      c["reason"] or "")
    return table


def side_channel_table(isolation: dict) -> Table:
    table = Table(title="Timing side channels (AUC = P(slower group is slower), 95% CI)")
    for col in ("path", "modality", "comparison", "AUC", "95% CI", "median ms (a / b)",
                "distinguishable"):
        table.add_column(col)
    for s in isolation["side_channel"]:
        medians = (f"{s['median_a_ms']:.1f} / {s['median_b_ms']:.1f}"
                   if s.get("median_a_ms") is not None else "–")
        table.add_row(s["path"], s["modality"], s["kind"], _fmt(s["auc"], ".2f"),
                      f"[{_fmt(s['ci_low'], '.2f')}, {_fmt(s['ci_high'], '.2f')}]", medians,
                      {True: "yes", False: "no", None: "–"}[s["distinguishable"]])
    return table


def print_isolation(isolation: dict, console: Console) -> None:
    console.print(verdict_table(isolation))
    for probe in isolation["uuid_probe"]:
        console.print(f"uuid probe ({probe['path']}): {probe['finding']}")
    if isolation["side_channel"]:
        console.print(side_channel_table(isolation))
