"""Summarise a workload: counts, bytes, modalities, media reuse, tenants and expected cache hits."""

from __future__ import annotations

import argparse
from collections import Counter

from rich.console import Console
from rich.table import Table

from bench.vocab import MEDIA_MODALITIES
from bench.workload import Workload, load_workload


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", help="workload directory or a manifest file inside it")


def run(args: argparse.Namespace) -> int:
    wl = load_workload(args.workload)
    console = Console()
    for table in summarise(wl):
        console.print(table)
    return 0


def summarise(wl: Workload) -> list[Table]:
    """Rich tables for a workload, computed in one streaming pass over its requests."""
    n, expect, modalities, tenants, turns = 0, Counter(), Counter(), Counter(), Counter()
    uses, last_arrival = Counter(), None
    for req in wl.requests():
        n += 1
        expect[req["oracle"]["expect"]] += 1
        modalities.update(req["modalities"] or ["text"])
        tenants[(req["tenant"], req["salt_ref"])] += 1
        turns[req["turn"]] += 1
        uses.update(p["media"] for m in req["messages"] for p in m["content"] if "media" in p)
        last_arrival = req["arrival_s"]
    meta = wl.metadata

    overview = Table(title=f"workload {meta['spec']['name']} (seed {meta['seed']})", show_header=False)
    overview.add_row("directory", str(wl.dir))
    overview.add_row("spec", f"{meta['spec']['file']} sha256 {meta['spec']['sha256'][:12]}")
    overview.add_row("requests", str(n))
    overview.add_row("cases", str(meta["counts"]["cases"]))
    overview.add_row("max turn", str(max(turns, default=0)))
    overview.add_row("arrival span", "none" if last_arrival is None else f"{last_arrival:.2f} s")
    hit = (n - expect["none"]) / n if n else 0.0
    overview.add_row("expected hit fraction", f"{hit:.3f} (full {expect['full'] / max(n, 1):.3f}, "
                                              f"partial {expect['partial'] / max(n, 1):.3f})")

    media = Table(title="media")
    for col in ("modality", "reqs", "files", "contents", "variants", "MB", "refs", "refs/file"):
        media.add_column(col, justify="right" if col != "modality" else "left")
    for modality in MEDIA_MODALITIES:
        items = [m for m in wl.media.values() if m.modality == modality]
        refs = sum(uses[m.id] for m in items)
        media.add_row(modality, str(modalities[modality]), str(len(items)),
                      str(len({m.content_id for m in items})), str(sum(m.variant for m in items)),
                      f"{sum(m.bytes for m in items) / 1e6:.2f}", str(refs),
                      f"{refs / len(items):.1f}" if items else "-")
    media.add_row("text-only", str(modalities["text"]), "", "", "", "", "", "")

    people = Table(title="tenants (salt references, not secrets)")
    for col in ("tenant", "salt ref", "requests"):
        people.add_column(col)
    for (tenant, salt), count in sorted(tenants.items()):
        people.add_row(tenant, salt or "(none)", str(count))
    return [overview, media, people]
