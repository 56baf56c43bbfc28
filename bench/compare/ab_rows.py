"""The metric rows of a paired A/B (both sides runs of one :mod:`bench.campaigns.ab`).

Rows: one over all requests (path, modality and salt mode ``all``), one per path, one per
path x modality x salt mode; per-request metrics of a row over several groups pool their
requests unit by unit, per-pass metrics average their groups' unit changes. The gate
judges the row over all requests, so a change that slows every request (an engine step, a
scheduler) is seen with all of them; the others are reported with their own intervals. A
group row is gated too where it is exact (the same change in every unit: cached tokens on a
serial run are deterministic, so a difference is a behaviour change, not noise), and for
leaked tokens (must stay 0).

The run's false-alarm rate is controlled across its gated rows: every interval is at
``1 - (1 - confidence) / K`` (Bonferroni), ``K`` the gated rows that are not exact, so a
same-build A/B fails the gate with probability at most ``1 - confidence``.

States (:mod:`bench.compare.power` for "detectable"): **regressed** (interval excludes no
change on the bad side, change beyond the threshold), **improved** (the same, the other
way), **no significant change** (neither, and the row was powered, or its interval's bad
end is within the threshold), else **inconclusive** (underpowered, with how many start
pairs would power it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from bench.compare.intervals import estimate, scale, unscale
from bench.compare.paired import Paired, Unit, averaged, combine, merged, pairs, unit_changes
from bench.compare.power import detectable, units_needed
from bench.compare.samples import Side
from bench.compare.thresholds import Settings, Thresholds, format_threshold
from bench.compare.unpaired import judge
from bench.registry import METRICS, POINTS, ZERO, Metric
from bench.vocab import IMPROVED, INCONCLUSIVE, NO_CHANGE, REGRESSED

#: The modality and salt mode of a path's summary row.
ALL = "all"


def _fmt(metric: Metric, scaled: float) -> str:
    v = unscale(metric, scaled)
    return f"{v:+.1f}pp" if metric.change == POINTS else f"{v:+.1%}"


def judge_paired(metric: Metric, est: Paired | None, threshold: float | None,
                 settings: Settings, level: float) -> tuple[str, str, dict]:
    """(state, reason, interval fields) of one paired row at interval ``level``."""
    if est is None:
        return INCONCLUSIVE, "no unit with a value on both sides", {}
    bounds = est.interval(level)
    fields = {"change": unscale(metric, est.change), "low": None, "high": None,
              "se": est.se, "sd_start": est.sd_start,
              "starts": est.starts, "units": est.units,
              "df": None if math.isinf(est.df) else est.df, "level": level}
    if bounds is None:
        return INCONCLUSIVE, (f"{est.starts} start pair: the spread between server starts "
                              "cannot be told from a change; run at least 2"), fields
    fields.update(low=unscale(metric, bounds[0]), high=unscale(metric, bounds[1]))
    limit = 0.0 if threshold is None else metric.worse(scale(metric, metric.worse(threshold)))
    worse_low, worse_high = sorted((metric.worse(bounds[0]), metric.worse(bounds[1])))
    change = metric.worse(est.change)
    what = "exact: the same change in every unit" if est.exact else \
        "interval excludes no change"
    if worse_low > 0 and change > limit:
        return REGRESSED, f"worse beyond the threshold, {what}", fields
    if worse_high < 0 and -change > limit:
        return IMPROVED, f"better beyond the threshold, {what}", fields
    if threshold is None:
        return NO_CHANGE, "not gated", fields
    if est.exact:
        return NO_CHANGE, ("the same in every unit" if change == 0 else
                           "an exact change within the threshold"), fields
    can = detectable(est.se, est.df, level, limit)
    fields["detectable"] = unscale(metric, metric.worse(can))
    target = settings.detect * limit
    if can <= target:
        return NO_CHANGE, (f"no significant change; a regression of {_fmt(metric, metric.worse(can))}"
                           f" would be caught 90% of the time"), fields
    if worse_high <= limit:
        return NO_CHANGE, "interval rules out a regression beyond the threshold", fields
    k = units_needed(est.se, est.df, est.starts, level, limit, target)
    more = (f"about {k} start pairs would catch {_fmt(metric, metric.worse(target))}" if k else
            f"more start pairs or requests per block needed to catch "
            f"{_fmt(metric, metric.worse(target))}")
    return INCONCLUSIVE, (f"underpowered: would catch only {_fmt(metric, metric.worse(can))} "
                          f"(90% of the time) with {est.starts} start pairs, {est.units} "
                          f"units; {more}"), fields


def summary_changes(metric: Metric, base: Side, new: Side, keys: list, settings: Settings,
                    per_group: dict | None = None) -> dict[Unit, float]:
    """Per unit: the change of ``keys``' groups together; per-request metrics over their
    requests pooled unit by unit, per-pass metrics as the mean of their groups' unit changes
    (``per_group``: those changes, where already computed)."""
    if not metric.per_request:
        if per_group is None:
            per_group = {k: unit_changes(metric, base.groups[k], new.groups[k],
                                         pairs(base.groups[k], new.groups[k]),
                                         settings.min_requests) for k in keys}
        return averaged([per_group[k] for k in keys])
    b, n = (merged([side.groups[k] for k in keys]) for side in (base, new))
    return unit_changes(metric, b, n, pairs(b, n), settings.min_requests)


def ab_rows(base: Side, new: Side, thresholds: Thresholds,
            metrics: Iterable[Metric] = METRICS.values()) -> list[dict]:
    """Every row of a paired A/B for ``metrics``, judged (see the module docstring)."""
    settings = thresholds.settings
    metrics = list(metrics)
    keys = [k for k in base.groups if k in new.groups]
    rows: list[tuple[tuple[str, str, str], Metric, Paired | None, bool]] = []
    paired = {k: pairs(base.groups[k], new.groups[k]) for k in keys}
    for metric in [m for m in metrics if m.better != ZERO]:
        per_group = {k: unit_changes(metric, base.groups[k], new.groups[k], paired[k],
                                     settings.min_requests) for k in keys}
        rows.append(((ALL, ALL, ALL), metric,
                     combine(summary_changes(metric, base, new, keys, settings, per_group)), True))
        for path in dict.fromkeys(k[0] for k in keys):
            rows.append(((path, ALL, ALL), metric, combine(summary_changes(
                metric, base, new, [k for k in keys if k[0] == path], settings, per_group)),
                False))
        for key, changes in per_group.items():
            rows.append((key, metric, combine(changes), False))

    def gated(key: tuple, metric: Metric, est: Paired | None, overall: bool) -> bool:
        return thresholds.threshold(metric.name, key) is not None and (
            overall or bool(est and est.exact))

    noisy = sum(1 for row in rows if gated(*row) and not (row[2] and row[2].exact))
    level = 1 - (1 - settings.confidence) / max(noisy, 1)
    out = []
    for key, metric, est, overall in rows:
        threshold = thresholds.threshold(metric.name, key)
        state, reason, fields = judge_paired(metric, est, threshold, settings, level)
        is_gated = gated(key, metric, est, overall)
        if not is_gated and threshold is not None and state != NO_CHANGE:
            reason = f"{reason} (reported: the row over all requests is gated)"
        values = {"base": None, "new": None}
        if ALL not in key:
            e = estimate(metric, base.groups[key], new.groups[key], level=settings.confidence,
                         min_requests=settings.min_requests)
            values = {"base": e.base, "new": e.new}
        out.append({"path": key[0], "modality": key[1], "salt_mode": key[2],
                    "metric": metric.name, "unit": metric.unit, "better": metric.better,
                    "change_unit": metric.change, **values, "change": None, "low": None,
                    "high": None, **fields, "summary": ALL in key,
                    "threshold": format_threshold(metric, threshold), "gated": is_gated,
                    "state": state, "reason": reason})
    for key in keys:
        for metric in [m for m in metrics if m.better == ZERO]:
            threshold = thresholds.threshold(metric.name, key)
            est = estimate(metric, base.groups[key], new.groups[key], level=settings.confidence)
            state, reason = judge(metric, est, threshold, settings)
            out.append({"path": key[0], "modality": key[1], "salt_mode": key[2],
                        "metric": metric.name, "unit": metric.unit, "better": metric.better,
                        "change_unit": metric.change, "base": est.base, "new": est.new,
                        "change": None, "low": None, "high": None, "summary": False,
                        "threshold": format_threshold(metric, threshold),
                        "gated": threshold is not None, "state": state, "reason": reason})
    return out
