"""The router policy x salt mode comparison as a table (console, Markdown) and a chart."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.report.markdown import to_markdown
from bench.report.style import PALETTE, plt, save, series_style  # plt: Agg backend set
from bench.report.tables import AGREE, Table, fmt, ms, rate, tput

#: Chart panels: (row key, title, format).
PANELS = (("hit_rate", "prefix-cache hit rate", ".2f"),
          ("median_ttft_ms", "TTFT median, ms", ".0f"),
          ("request_throughput", "requests / s", ".1f"),
          ("imbalance", "load imbalance (busiest / mean)", ".2f"))


def policy_table(doc: dict) -> Table:
    """One row per policy x path x salt mode."""
    rows = [[r["policy"], r["path"], r["salt_mode"], str(r["requests"]), rate(r["hit_rate"]),
             fmt(r["salt_cost_pp"], "+.1f"), AGREE[r["counters_agree"]], ms(r["median_ttft_ms"]),
             ms(r["p99_ttft_ms"]), tput(r["request_throughput"]), fmt(r["imbalance"], ".2f"),
             rate(r["affinity"]), fmt(r["lost_tokens"], "d"),
             f"{r['misdirected']}/{r['exposed']}" if r["exposed"] else "–",
             fmt(r.get("misdirected_by_chance"), ".1f"), str(r["leaked_tokens"])]
            for r in doc["rows"]]
    return Table("Router policy x salt mode",
                 ["policy", "path", "salt mode", "requests", "hit rate", "salt cost (pp)",
                  "counters agree", "TTFT p50 ms", "TTFT p99 ms", "req/s", "imbalance",
                  "affinity", "tokens lost to routing", "misdirected / exposed",
                  "by chance", "leaked tokens"], rows, keys=3)


def policy_notes(doc: dict) -> list[str]:
    """One line per policy: its status, router start, and kv_aware's decisions."""
    out = []
    for e in doc["policies"]:
        if e["status"] != "ok":
            out.append(f"{e['policy']}: n/a ({e['error']})")
            continue
        line = f"{e['policy']}: router ready in {e['router_start_s']:.0f} s, " \
               f"{e['router_rss_mib']:.0f} MiB"
        if e.get("kv_decisions"):
            line += "; kv_aware decisions: " + ", ".join(
                f"{k} {v}" for k, v in sorted(e["kv_decisions"].items()))
        if e.get("unavailable"):
            line += "; n/a: " + ", ".join(f"{p} ({why})" for p, why in e["unavailable"].items())
        out.append(line)
    replicas = doc.get("replicas") or []
    if replicas:
        out.append(f"{len(replicas)} replicas ready in {doc['replicas_start_s']:.0f} s; memory "
                   + ", ".join(f"{r['name']} {r['rss_mib']:.0f} MiB" for r in replicas)
                   + " at start")
    return out


def policies_markdown(doc: dict) -> str:
    spec = doc.get("workload", {})
    return "\n\n".join([f"# Router policies x salt modes ({spec.get('name', '?')})",
                        to_markdown(policy_table(doc)),
                        "\n".join(f"- {line}" for line in policy_notes(doc))]) + "\n"


def policy_chart(doc: dict, out_dir: Path) -> list[Path]:
    """Four panels, one above the other (hit rate, TTFT, throughput, imbalance): policies
    (x paths) on the x axis, one bar per salt mode."""
    rows = doc["rows"]
    paths = list(dict.fromkeys(r["path"] for r in rows))
    cats = list(dict.fromkeys((r["policy"], r["path"]) for r in rows))
    modes = list(dict.fromkeys(r["salt_mode"] for r in rows))
    labels = [p if len(paths) == 1 else f"{p}\n{path}" for p, path in cats]
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(max(8.0, 1.4 * len(cats)), 11),
                             layout="constrained")
    x, width = np.arange(len(cats)), 0.8 / max(len(modes), 1)
    for ax, (key, title, spec) in zip(axes.flat, PANELS):
        for i, mode in enumerate(modes):
            by_cat = {(r["policy"], r["path"]): r[key] for r in rows if r["salt_mode"] == mode}
            values = [by_cat.get(c) for c in cats]
            style = series_style(i)
            bars = ax.bar(x + (i - (len(modes) - 1) / 2) * width,
                          [np.nan if v is None else v for v in values], width, label=mode,
                          color=style["color"], hatch=style["hatch"], edgecolor="white")
            ax.bar_label(bars, labels=[fmt(v, spec) for v in values], fontsize=7)
        ax.set_title(title)
        ax.set_xticks(x, labels)
    axes.flat[0].legend(title="salt mode")
    fig.suptitle(f"What salting costs under each router policy "
                 f"({doc.get('workload', {}).get('name', '?')}, {len(doc.get('replicas', []))} "
                 "replicas)", fontweight="bold", color=PALETTE[-1])
    return save(fig, out_dir, "policies")
