"""What salting costs in capacity: per path and salt mode, the highest request rate whose
SLO attainment meets a target (:mod:`bench.capacity.search` over
:mod:`bench.capacity.probe` runs), and per path the capacity salting costs.

The cost of salting on a path is ``1 - salted / unsalted`` capacity, fitted from both salt
modes' probes at once (:func:`bench.capacity.fit.fit_cost`). A path's salt modes are searched
together, probe by probe, so that the server's drift does not favour either. ``capacity.json``
is rewritten after every path, so an interrupted campaign leaves what it found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from rich.console import Console

from bench import SCHEMA_VERSION
from bench.capacity.fit import fit_cost
from bench.capacity.probe import Prober
from bench.capacity.search import SearchSettings, search_interleaved
from bench.docio import write_json
from bench.engine.target import Target
from bench.goodput import describe
from bench.run.settings import RunOptions
from bench.vocab import SALT_MODES

CAPACITY_FILE, CAPACITY_KIND = "capacity.json", "saltbench-capacity"
#: How every probe starts, said in the document.
CACHE_STATE = ("every probe the same workload, a run of its own (no prefix shared with "
               "another probe), after the server's prefix, multimodal and encoder caches "
               "were reset; hits only within the probe")


def salting_cost(none: dict, salted: dict) -> dict:
    """The share of capacity that salting costs on one path, with its interval, from the two
    searches' rows."""
    def probes(row: dict) -> list[tuple[float, int, int]]:
        return [(p["rate"], p["sent"], p["good"]) for p in row["probes"]]

    s = none["settings"]
    return fit_cost(probes(none), probes(salted), s["target"], s["level"], s["window"]).to_dict()


def run_capacity(target: Target, spec: str, opts: RunOptions, settings: SearchSettings,
                 out: Path, run_id: str, console: Console,
                 done: Callable[[dict], None] = lambda row: None, seed: int = 0) -> dict:
    """Search every path x salt mode of ``opts`` (every probe the workload of ``seed``),
    a path's salt modes interleaved probe by probe on the one server
    (:func:`bench.capacity.search.search_interleaved`); return (and write)
    ``capacity.json`` (after every path), complete when every search told both ends of its
    capacity's interval."""
    doc: dict = {"schema_version": SCHEMA_VERSION, "kind": CAPACITY_KIND, "id": run_id,
                 "spec": spec, "objectives": opts.goodput, "slo": describe(opts.goodput or {}),
                 "settings": asdict(settings), "cache_state": CACHE_STATE,
                 "target": {k: target.metadata.get(k) for k in ("vllm_version", "model",
                                                                  "engine", "managed")},
                 "rows": [], "costs": [], "complete": False}
    modes = [m for m in SALT_MODES if m in opts.salt_modes]
    for path in opts.paths:
        probers = {mode: Prober(target, spec, replace(opts, paths=[path], salt_modes=[mode]),
                                out / f"{path}-{mode}", f"capacity-{path}-{mode}", console,
                                seed) for mode in modes}
        found = search_interleaved(probers, settings, seed)
        for mode in modes:
            row = {"path": path, "salt_mode": mode, **found[mode].to_dict(),
                   "probe_log": probers[mode].log}
            doc["rows"].append(row)
            done(row)
        write_json(out / CAPACITY_FILE, doc)
        if len(modes) == len(SALT_MODES):
            by_mode = {r["salt_mode"]: r for r in doc["rows"] if r["path"] == path}
            doc["costs"].append({"path": path, **salting_cost(*(by_mode[m] for m in SALT_MODES))})
    doc["complete"] = all(r["low"] is not None and r["high"] is not None for r in doc["rows"])
    write_json(out / CAPACITY_FILE, doc)
    return doc
