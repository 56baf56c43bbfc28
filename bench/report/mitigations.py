"""The mitigation table: per configuration, each channel's verdicts and the TTFT cost."""

from __future__ import annotations

from bench.report.tables import Table, ms
from bench.vocab import CHANNELS


def _channel(cell: dict) -> str:
    """``SUBSTITUTED (6/6)``: the worst verdict and how many cells have it."""
    worst, counts = cell["worst"], cell["counts"]
    return "–" if worst is None else f"{worst} ({counts[worst]}/{sum(counts.values())})"


def mitigation_table(doc: dict) -> Table:
    rows = []
    for r in doc["rows"]:
        config = " ".join([*r["serve_args"], *(["client uuids per tenant"]
                                               if r["client_uuids"] != "as-sent" else [])])
        if r["status"] != "ok":
            rows.append([r["config"], config or "(stock)", *(["n/a"] * len(CHANNELS)),
                         "–", "–", "–", r.get("reason", "")])
            continue
        auc = r["timing_auc"]
        rows.append([r["config"], config or "(stock)",
                     *(_channel(r["channels"][c]) for c in CHANNELS),
                     "–" if auc is None else f"{auc['min']:.2f}–{auc['max']:.2f}",
                     ms(r["ttft_seen_ms"]), ms(r["ttft_unseen_ms"]),
                     f"exit {r['exit_code']}, {r['pairs']} timing pairs"])
    return Table("Tenant boundary per configuration (worst verdict, cells with it / cells "
                 "judged)", ["config", "serve flags / client", *CHANNELS, "timing paired AUC",
                             "median TTFT ms, media another tenant sent",
                             "median TTFT ms, media never seen", "notes"], rows, keys=2)
