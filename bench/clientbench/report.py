"""clientbench's table (Markdown) and chart (PNG and SVG) from its summary."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from bench.clientbench.session import CLIENTS, PROMPT_KINDS, REFERENCE
from bench.docio import write_text
from bench.report.markdown import to_markdown
from bench.report.style import save, series_style
from bench.report.tables import Table, fmt

MARKDOWN, CHART = "clientbench.md", "clientbench"


def _ratio(entry: dict, metric: str) -> str:
    r = entry.get(f"{metric}_ratio")
    if not r:
        return "–"
    return f"{r['ratio']:.2f}x [{r['low']:.2f}, {r['high']:.2f}]"


def table(doc: dict) -> Table:
    """One row per prompt kind, load and client."""
    rows = [[e["prompts"], f"{e['load']} {e['value']:g}", e["client"], str(e["repetitions"]),
             fmt(e["request_throughput"], ".1f"), _ratio(e, "request_throughput"),
             fmt(e["ttft_p50_ms"], ".2f"), fmt(e["ttft_p99_ms"], ".2f"),
             fmt(e["itl_p50_ms"], ".3f"), fmt(e["itl_p99_ms"], ".3f"),
             fmt(e["client_cpu_s"], ".1f"), fmt(e["peak_rss_mb"], ".0f"),
             fmt(e["server_cpu_share"], ".2f")] for e in doc["summary"]]
    return Table(f"Clients against the zero-work server (mean of repetitions; ratio to "
                 f"{REFERENCE} with a 95% bootstrap interval)",
                 ["prompts", "load", "client", "reps", "req/s", f"req/s vs {REFERENCE}",
                  "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "client CPU s",
                  "peak RSS MB", "server CPU share"], rows, keys=3)


def markdown(doc: dict) -> str:
    skipped = "".join(f"\n- {name}: {why}" for name, why in doc["skipped"].items())
    m = doc["metadata"].get("machine", {})
    return (f"## clientbench\n\n{m.get('cpu')} x{m.get('cpu_count')}, "
            f"{m.get('memory_gib')} GiB, Python {m.get('python')}; {doc['metadata']['date']}\n\n"
            f"{to_markdown(table(doc))}\n"
            + (f"\nSkipped:{skipped}\n" if skipped else "")
            + ("\n**Interrupted: partial results.**\n" if doc["interrupted"] else ""))


def chart(doc: dict, out_dir: Path) -> list[Path]:
    """Request throughput against concurrency per client, one panel per prompt kind."""
    kinds = [k for k in PROMPT_KINDS if any(e["prompts"] == k for e in doc["summary"])]
    fig, axes = plt.subplots(1, max(len(kinds), 1), figsize=(5 * max(len(kinds), 1), 4),
                             squeeze=False, layout="constrained")
    for ax, kind in zip(axes[0], kinds):
        for i, client in enumerate(CLIENTS):
            points = sorted((e["value"], e["request_throughput"]) for e in doc["summary"]
                            if e["prompts"] == kind and e["client"] == client
                            and e["load"] == "concurrency" and e["request_throughput"])
            if points:
                style = series_style(i)
                ax.plot(*zip(*points), label=client, color=style["color"],
                        marker=style["marker"], linestyle=style["linestyle"])
        ax.set(xscale="log", xlabel="concurrency", ylabel="requests/s",
               title=f"{kind} prompts, zero-work server")
        ax.legend()
    return save(fig, out_dir, CHART)


def write(doc: dict, out_dir: Path) -> list[Path]:
    """The Markdown table and the chart, beside ``clientbench.json``."""
    write_text(out_dir / MARKDOWN, markdown(doc))
    return [out_dir / MARKDOWN, *chart(doc, out_dir)]
