"""The trends document: every entry, per headline metric x path x modality x salt mode its
series (:mod:`bench.trends.series`) and change points (:mod:`bench.trends.changes`), the
verdict strip, and the exit code of a nightly job.

Exit code: 1 when the newest entry lies after a regression: in a gated series (a metric
with a threshold) the last change point is ``regressed``, or the newest entry's run has
problems or a tenant-boundary finding on a ``--fail-on`` channel (a leak stands out whatever
the timing); 0 otherwise;
bad input is 2 (the command's).
"""

from __future__ import annotations

from bench import SCHEMA_VERSION
from bench.compare.thresholds import Thresholds, format_threshold
from bench.registry import METRICS
from bench.trends.changes import changes
from bench.trends.series import Entry, group_keys, point, trended
from bench.verdicts.boundary import FOUND
from bench.verdicts.runs import problems
from bench.vocab import DEFAULT_FAIL_ON, EXIT_FOUND, EXIT_OK, REGRESSED

TRENDS_KIND, TRENDS_FILE = "saltbench-trends", "trends.json"


def entry_doc(entry: Entry) -> dict:
    return {"index": entry.index, "label": entry.label, "version": entry.version,
            "date": entry.date, "dirs": [str(r.dir) for r in entry.side.runs],
            "run_ids": [r.results["run_id"] for r in entry.side.runs],
            "reports": [str(p) for p in entry.reports],
            "boundary": entry.boundary(),
            "problems": [p for r in entry.side.runs for p in problems(r.results)]}


def build_trends(entries: list[Entry], thresholds: Thresholds, order: str,
                 fail_on: tuple[str, ...] = DEFAULT_FAIL_ON) -> dict:
    """The document (``kind`` saltbench-trends) with its exit code; a boundary finding of
    the newest entry fails it on the channels of ``fail_on`` (the others are reported)."""
    settings = thresholds.settings
    metrics = trended([m for m in METRICS.values()
                       if any(e.side.measured(m) for e in entries)])
    series = []
    for key in group_keys(entries):
        for metric in metrics:
            threshold = thresholds.threshold(metric.name, key)
            found = changes(metric, entries, key, threshold, settings.confidence,
                            settings.min_requests)
            series.append({
                "path": key[0], "modality": key[1], "salt_mode": key[2],
                "metric": metric.name, "unit": metric.unit, "better": metric.better,
                "change_unit": metric.change, "threshold": format_threshold(metric, threshold),
                "gated": threshold is not None,
                "points": [point(metric, e, key, settings.confidence, settings.min_requests)
                           for e in entries],
                "changes": [c.to_dict() for c in found]})
    docs = [entry_doc(e) for e in entries]
    newest = docs[-1]
    regressions = [s for s in series if s["gated"] and s["changes"]
                   and s["changes"][-1]["state"] == REGRESSED]
    found = [c for c, v in newest["boundary"].items() if v in FOUND and c in fail_on]
    code = EXIT_FOUND if regressions or found or newest["problems"] else EXIT_OK
    return {"schema_version": SCHEMA_VERSION, "kind": TRENDS_KIND, "order": order,
            "settings": {"confidence": settings.confidence, "thresholds": thresholds.source,
                         "fail_on": list(fail_on)},
            "entries": docs, "series": series,
            "newest": {"label": newest["label"], "regressed": [
                {k: s[k] for k in ("path", "modality", "salt_mode", "metric")}
                | {"change": s["changes"][-1]} for s in regressions],
                "boundary_findings": found, "problems": newest["problems"]},
            "exit_code": code}
