"""The tables of a run, built once as display strings and rendered three ways: on the
console (rich), in Markdown (PR comments, step summaries) and in the HTML report.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from bench.goodput import describe
from bench.verdicts.boundary import boundary_rows, exit_code, policy
from bench.verdicts.runs import failure_totals
from bench.vocab import CHANNELS, COMPARE_STYLE, JUDGEMENTS, VERDICT_STYLE

AGREE = {True: "yes", False: "NO", None: "–"}
#: Rich styles of the cells that need attention: verdicts, and a "NO" in an agreement column.
CELL_STYLE = {**{v: f"bold {colour}" for v, (colour, _, _) in VERDICT_STYLE.items()},
              **{s: f"bold {colour}" for s, colour in COMPARE_STYLE.items()}, "NO": "bold red"}


def fmt(value: float | None, spec: str) -> str:
    """``value`` formatted by ``spec``, or an en dash when missing."""
    return "–" if value is None else format(value, spec)


def ms(value: float | None) -> str:
    return fmt(value, ".1f")


def rate(value: float | None) -> str:
    return fmt(value, ".3f")


def tput(value: float | None) -> str:
    return fmt(value, ".2f")


@dataclass
class Table:
    """A titled table of display strings; the first ``keys`` columns are labels, the last
    ``text`` columns free text, the others numbers."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    keys: int = 1
    text: int = 0

    def numeric(self, column: int) -> bool:
        return self.keys <= column < len(self.headers) - self.text


def with_repetition(items: list[dict], table: Table) -> Table:
    """``table`` with a repetition column after its labels when ``items`` were repeated."""
    if not any(item.get("repetition") for item in items):
        return table
    k = table.keys
    return Table(table.title, [*table.headers[:k], "rep", *table.headers[k:]],
                 [[*row[:k], str(item.get("repetition", 0)), *row[k:]]
                  for item, row in zip(items, table.rows)], keys=k + 1, text=table.text)


def pass_table(results: dict) -> Table:
    """Per pass: hit rates from requests and counters, TTFT of hits and misses, throughput."""
    rows = [[p["path"], p["salt_mode"], f"{p.get('completed')}/{p.get('failed')}",
             rate(p.get("hit_rate_requests")), rate(p.get("hit_rate_counters")),
             AGREE[p.get("counters_agree")], ms(p.get("median_ttft_ms")),
             ms(p.get("p99_ttft_ms")), ms(p.get("median_ttft_incl_preprocess_ms")),
             ms(p.get("p50_ttft_hit_ms")),
             ms(p.get("p99_ttft_hit_ms")), ms(p.get("p50_ttft_miss_ms")),
             ms(p.get("p99_ttft_miss_ms")), tput(p.get("request_throughput")),
             tput(p.get("total_token_throughput"))] for p in results["passes"]]
    return with_repetition(results["passes"], Table(
                 "Per pass (measure phase)",
                 ["path", "salt mode", "ok/failed", "hit rate (requests)", "hit rate (counters)",
                  "counters agree", "TTFT p50 ms", "TTFT p99 ms", "TTFT incl. preprocess p50 ms",
                  "TTFT hit p50 ms",
                  "TTFT hit p99 ms", "TTFT miss p50 ms", "TTFT miss p99 ms", "req/s", "tok/s"],
                 rows, keys=2))


def failure_tables(results: dict) -> list[Table]:
    """The measured requests that failed, per pass and kind, then an example error of each
    kind; none when nothing failed."""
    passes = [p for p in results["passes"] if p.get("failed")]
    if not passes:
        return []
    totals = failure_totals(passes)
    rows = [[p["path"], p["salt_mode"], str(p["failed"]),
             *(str(p.get("failures", {}).get(kind, 0)) for kind in totals)] for p in passes]
    by_pass = with_repetition(passes, Table("Failed requests (measure phase)",
                                            ["path", "salt mode", "failed", *totals], rows,
                                            keys=2))
    examples: dict[str, str] = {}
    for p in passes:
        for kind, error in p.get("failure_examples", {}).items():
            examples.setdefault(kind, error or "–")
    return [by_pass, Table("Failed requests: an example error of each kind",
                           ["failure", "requests", "example error"],
                           [[kind, str(n), examples.get(kind, "–")] for kind, n in totals.items()],
                           text=1)]


def goodput_tables(results: dict) -> list[Table]:
    """Per path, modality and salt mode: requests within the run's service-level objectives
    (``--goodput``), as a share of those sent and per second; none without objectives."""
    slos = results["metadata"].get("options", {}).get("goodput")
    if not slos:
        return []
    rows = [[g["path"], g["modality"], g["salt_mode"],
             f"{g.get('good_requests')}/{g['completed'] + g['failed']}",
             fmt(g.get("slo_attainment"), ".1%"), tput(g.get("request_goodput")),
             tput(g.get("request_throughput"))] for g in results["groups"]]
    return [with_repetition(results["groups"], Table(
        f"Goodput (objectives: {describe(slos)}; per second: the group's share)",
        ["path", "modality", "salt mode", "good/sent", "SLO attainment", "goodput req/s",
         "req/s"], rows, keys=3))]


def group_table(results: dict) -> Table:
    rows = [[g["path"], g["modality"], g["salt_mode"], f"{g.get('completed')}/{g.get('failed')}",
             rate(g.get("hit_rate")), rate(g.get("hit_fraction_of_expected")),
             ms(g.get("median_ttft_ms")), ms(g.get("p99_ttft_ms")),
             ms(g.get("median_ttft_incl_preprocess_ms")), ms(g.get("mean_tpot_ms")),
             ms(g.get("mean_itl_ms")), ms(g.get("mean_itl_token_ms")),
             ms(g.get("median_e2el_ms")), tput(g.get("request_throughput")),
             tput(g.get("total_token_throughput"))] for g in results["groups"]]
    return with_repetition(results["groups"], Table(
        "Per path, modality and salt mode (measure phase; throughput is the group's share)",
        ["path", "modality", "salt mode", "ok/failed", "hit rate", "cached / expected",
         "TTFT p50 ms", "TTFT p99 ms", "TTFT incl. preprocess p50 ms", "TPOT mean ms",
         "ITL mean ms", "ITL tokens-only mean ms", "E2EL p50 ms", "req/s", "tok/s"],
        rows, keys=3))


#: The metrics whose run-to-run spread the tables show (all are in results["spread"]).
SPREAD_SHOWN = ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "request_throughput", "hit_rate")


def spread_table(results: dict) -> Table:
    """Per group with repetitions: the coefficient of variation of headline metrics."""
    rows = [[s["path"], s["modality"], s["salt_mode"], str(s["repetitions"]),
             *(fmt((s["metrics"].get(m) or {}).get("cv"), ".1%") for m in SPREAD_SHOWN)]
            for s in results.get("spread", [])]
    return Table("Run-to-run spread (coefficient of variation across repetitions)",
                 ["path", "modality", "salt mode", "repetitions", *SPREAD_SHOWN], rows, keys=3)


def judgement_line(results: dict) -> str:
    """One line a CI log or PR shows: how many requests were judged, and how they fared."""
    c = results.get("judgements", {}).get("counts", {})
    partial = "INTERRUPTED run, results are partial; " if results.get("interrupted") else ""
    if results.get("stopped"):
        partial = f"STOPPED EARLY ({results['stopped']}), results are partial; "
    if resumed := results.get("metadata", {}).get("resumed"):
        partial += f"resumed {len(resumed)} time(s); "
    oracle = results.get("oracle", {})
    return (f"{partial}requests judged exactly: {c.get('judged', '–')} of "
            f"{c.get('requests', '–')} (met {c.get('met', '–')}, leak {c.get('leak', '–')}, "
            f"under-hit {c.get('under-hit', '–')}; unjudged {c.get('unjudged', '–')}: an "
            f"earlier output's block {c.get('unjudged_output_blocks', '–')}, a source without a "
            f"layout {c.get('unjudged_unknown_source', '–')}, the rest a source in flight; "
            f"failed {c.get('failed', '–')}; no layout, render failed or run interrupted: "
            f"{c.get('no-layout', '–')}); "
            f"workload oracle agreed: {oracle.get('agreed', '–')}/{oracle.get('compared', '–')}; "
            f"prompt-token mismatches between paths: "
            f"{len(results.get('prompt_token_mismatches', []))}")


def judgement_table(results: dict) -> Table:
    """Per path x modality x salt mode (prime and measure phases): the judgements."""
    cols = ("requests", *JUDGEMENTS, "leaked_tokens", "missing_tokens")
    rows = [[g["path"], g["modality"], g["salt_mode"], *(fmt(g.get(c), "") for c in cols)]
            for g in results.get("judgements", {}).get("groups", [])]
    return Table("Cache judgements per request (prefix-cache model)",
                 ["path", "modality", "salt mode", *(c.replace("_", " ") for c in cols)],
                 rows, keys=3)


def problem_table(results: dict) -> Table:
    """The requests that leaked or under-hit, with the bounds the model allowed."""
    cols = ("phase", "path", "salt_mode", "request_id", "modality", "judgement",
            "prompt_tokens", "cached_tokens", "cached_lower", "cached_upper")
    rows = [[fmt(u.get(c), "") for c in cols]
            for u in results.get("judgements", {}).get("problems", [])]
    return Table("Requests outside their cache bounds (lower: guaranteed, upper: allowed)",
                 [c.replace("_", " ") for c in cols], rows, keys=6)


def at(row: dict) -> str:
    """A row's path, and its replica behind a router (``chat @r1``)."""
    return row["path"] + (f" @{row['replica']}" if row.get("replica") else "")


def verdict_table(iso: dict) -> Table:
    """One row per cell, then one per uuid probe (its salt verdict; its finding is in
    :func:`uuid_table`)."""
    rows = [[at(c), c["modality"],
             c["verdict"], c.get("reason") or "", str(c.get("leaked_tokens") or 0),
             AGREE[c.get("counters", {}).get("agree")]] for c in iso["cells"]]
    rows += [[at(u), f"{u.get('modality', 'image')} (uuid probe)", u.get("verdict") or "–",
              u.get("reason") or "", fmt(u.get("leaked_tokens"), "d"), AGREE[None]]
             for u in iso.get("uuid_probe", [])]
    return Table("Isolation verdicts", ["path", "modality", "verdict", "reason",
                                        "leaked tokens", "counters agree"], rows, keys=4)


def side_channel_table(iso: dict) -> Table:
    """Per row: effect size, one-sided paired test (Holm across the cross-tenant rows) and
    what it could detect;
    rows written before these statistics existed show "–"."""
    def detectable(s: dict) -> str:
        """"none" for a tested row at whose sizes no AUC at all could reach alpha."""
        if s.get("p_value") is not None and s.get("min_detectable_auc") is None:
            return "none"
        return rate(s.get("min_detectable_auc"))

    rows = [[at(s), s["modality"], s["kind"], rate(s.get("auc")),
             "–" if s.get("ci_low") is None else f"{rate(s['ci_low'])}–{rate(s['ci_high'])}",
             f"{s.get('n_a')}/{s.get('n_b')}",
             f"{ms(s.get('median_a_ms'))} / {ms(s.get('median_b_ms'))}",
             fmt(s.get("p_adjusted"), ".3g"), detectable(s), s.get("finding") or "–"]
            for s in iso.get("side_channel", [])]
    return Table("Timing side channel (paired AUC = T+/(T+ + T-) of TTFT a - TTFT b, 95% "
                 "bootstrap CI over pairs; one-sided Wilcoxon signed-rank p, Holm across the "
                 "cross-tenant rows, controls alone)",
                 ["path", "modality", "kind", "paired AUC", "95% CI", "n a/b", "median ms a / b",
                  "p (Holm)", "min detectable AUC (at alpha/tested rows)", "finding"], rows,
                 keys=3)


def uuid_table(iso: dict) -> Table:
    rows = [[at(u), u.get("modality", "image"), u.get("content") or "–",
             u.get("finding") or "", str(u.get("same_salt_cached_tokens")),
             str(u.get("cross_salt_cached_tokens")), str(u.get("mm_cache_hits"))]
            for u in iso.get("uuid_probe", [])]
    return Table("Media UUID probe", ["path", "modality", "media content", "finding",
                                      "same-salt cached tokens", "cross-salt cached tokens",
                                      "mm cache hits"], rows, keys=3)


def _guess(row: dict) -> tuple[str, str]:
    """(one probe pair's accuracy with its interval, pairs for 95%) of a timing row."""
    guess = row.get("guess")
    if not guess or guess.get("p_pair") is None:
        return "–", "–"
    point, low, high = guess["accuracy"]["1"]
    needed = guess["probes_for_target"]
    return (f"{rate(point)} [{rate(low)}–{rate(high)}]",
            f"{needed} pairs" if needed else f"> {max(map(int, guess['accuracy']))} pairs")


def boundary_table(iso: dict) -> Table:
    """The tenant boundary: per path x modality a verdict per channel, the timing figures,
    and what a guess from timing is worth; the policy's channels are marked."""
    gated = policy(iso)
    rows = []
    for r in boundary_rows(iso):
        accuracy, needed = _guess(r)
        rows.append([at(r), r["modality"],
                     *(r[c] for c in CHANNELS),
                     "–" if r.get("auc") is None else
                     f"{rate(r['auc'])} [{rate(r['ci_low'])}–{rate(r['ci_high'])}]",
                     rate(r.get("min_detectable_auc")), accuracy, needed])
    return Table("Tenant boundary (policy: fails on "
                 f"{', '.join(gated) or 'nothing'}; exit {exit_code(iso)})",
                 ["path", "modality", *(f"{c}{' (gated)' if c in gated else ''}"
                                        for c in CHANNELS),
                  "timing paired AUC [95% CI]", "min detectable AUC",
                  "guess from 1 probe pair [95% CI]", "pairs for 95% (CI low end)"],
                 rows, keys=5)


def to_rich(table: Table) -> RichTable:
    """A rich table; verdicts and disagreements are coloured."""
    out = RichTable(title=table.title)
    for i, header in enumerate(table.headers):
        out.add_column(header, justify="right" if table.numeric(i) else "left",
                       no_wrap=i < table.keys)
    for row in table.rows:
        out.add_row(*(f"[{CELL_STYLE[c]}]{c}[/]" if c in CELL_STYLE else escape(c) for c in row))
    return out


def report_console() -> Console:
    """Standard output; wide enough for the tables when it is not a terminal (logs, CI)."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def print_summary(results: dict, console: Console) -> None:
    console.print(to_rich(pass_table(results)))
    for table in [*failure_tables(results), *goodput_tables(results)]:
        console.print(to_rich(table))
    if results.get("spread"):
        console.print(to_rich(spread_table(results)))
    console.print(to_rich(judgement_table(results)))
    problems = results["judgements"]["problems"]
    bad = problems or results.get("oracle", {}).get("disagreements")
    console.print(f"[{'red' if bad else 'green'}]{judgement_line(results)}[/]")
    if problems:
        console.print(to_rich(problem_table(results)))


def print_isolation(iso: dict, console: Console) -> None:
    console.print(to_rich(boundary_table(iso)))
    console.print(to_rich(verdict_table(iso)))
    if iso.get("uuid_probe"):
        console.print(to_rich(uuid_table(iso)))
    if iso.get("side_channel"):
        console.print(to_rich(side_channel_table(iso)))
        opts = iso.get("metadata", {}).get("isolation_options", {})
        target = opts.get("samples_power_target")
        why = (f"enough to detect a paired AUC of {target['target_auc']} with "
               f"{target['power']:.0%} power at alpha {target['alpha']}, Holm-adjusted across "
               f"{target['tests']} cross-tenant rows"
               if target else "as given; each row shows the smallest AUC it could detect")
        console.print(f"side channel: {opts.get('samples', '–')} pairs per row, {why}")
