"""The states of a comparison's metric rows when the sides are not paired (sets of runs, each
run on its own server start): per path x modality x salt mode, every headline metric's change
with a Welch t interval over server starts (:mod:`bench.compare.intervals`), judged.

A metric **regressed** when its interval excludes no change on the bad side AND the change
passes the threshold (**improved**: the same, the other way); it shows **no significant
change** when the interval rules out a regression beyond the threshold (its bad end is within
it) or the row was powered (:mod:`bench.compare.power`: it would catch ``detect`` times the
threshold 90% of the time); anything else is **inconclusive**, with the reason (one server
start on a side, or how far the interval reaches, the smallest regression it would catch and
about how many starts would settle it). Leaked tokens must stay 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.compare.intervals import (
    MAX_STARTS,
    MIN_STARTS,
    Estimate,
    estimate,
    scale,
    starts_needed,
    unscale,
)
from bench.compare.power import detectable
from bench.compare.samples import Side
from bench.compare.thresholds import Settings, Thresholds, format_threshold
from bench.registry import METRICS, POINTS, ZERO, Metric
from bench.vocab import IMPROVED, INCONCLUSIVE, NO_CHANGE, NOT_AVAILABLE, REGRESSED


def _fmt(metric: Metric, value: float) -> str:
    return f"{value:+.1f}pp" if metric.change == POINTS else f"{value:+.0%}"


def _needed(metric: Metric, est: Estimate, limit: float) -> float:
    """How far the interval's half width must shrink (on its scale) to decide, were the
    change to stay as it is: below the distance of the change from no change (it is
    beyond the threshold) or from the threshold (it is within)."""
    assert est.change is not None
    p = metric.worse(scale(metric, est.change))  # on the interval's scale, positive is worse
    lim = metric.worse(scale(metric, metric.worse(limit)))
    return p if p > lim else lim - p


def _more(k: int | None, spread: str) -> str:
    return (f"about {k} runs (server starts) per side would decide at {spread}" if k else
            f"more than {MAX_STARTS} server starts per side would be needed at {spread} (a "
            f"change this close to the threshold)")


def _underpowered(metric: Metric, est: Estimate, limit: float, settings: Settings) -> str:
    """Why an interval cannot decide, how far it reaches and about how many server starts
    per side would decide at this spread (were the change to stay as it is)."""
    assert est.change is not None and est.low is not None and est.high is not None
    bad = max(est.low, est.high, key=metric.worse)
    good = min(est.low, est.high, key=metric.worse)
    if metric.worse(scale(metric, est.change)) > metric.worse(scale(metric, metric.worse(limit))):
        why = f"interval reaches {_fmt(metric, good)} (includes no change)"
    else:
        why = f"interval reaches {_fmt(metric, bad)} (threshold {format_threshold(metric, limit)})"
    k = starts_needed(_needed(metric, est, limit), est.sd_base or 0.0, est.sd_new or 0.0,
                      settings.confidence)
    can = detectable_change(metric, est, limit, settings)
    catch = f" (would catch only {_fmt(metric, can)} 90% of the time)" if can is not None else ""
    return (f"{why}: underpowered with {est.n_base} vs {est.n_new} server starts{catch}; "
            f"{_more(k, 'this spread')}")


def detectable_change(metric: Metric, est: Estimate, threshold: float | None,
                      settings: Settings) -> float | None:
    """The smallest regression (a fraction, or points; signed in the bad direction) the row
    catches 90% of the time at its own noise (:mod:`bench.compare.power`); None without an
    interval or a threshold."""
    if threshold is None or est.se is None or est.df is None or metric.better == ZERO:
        return None
    limit = metric.worse(scale(metric, metric.worse(threshold)))
    can = detectable(est.se, est.df, settings.confidence, limit)
    return unscale(metric, metric.worse(can))


def _one_start(metric: Metric, est: Estimate, limit: float, settings: Settings) -> str:
    """Why a side with one server start cannot decide, and what would: a set of runs per
    side (about how many, when a side with several starts shows their spread)."""
    where = ("per side" if max(est.n_base, est.n_new) < MIN_STARTS else
             f"on the {'base' if est.n_base < MIN_STARTS else 'new'} side")
    why = (f"{est.n_base} vs {est.n_new} server start(s): one server start {where} cannot "
           f"separate a change from the start-to-start spread (each start shifts timings by "
           f"its own offset); compare sets of runs, each run on its own server start")
    sd = est.sd_base if est.sd_base is not None else est.sd_new
    if sd is None:
        return f"{why} (e.g. 3 per side: compare runs/base runs/new)"
    k = starts_needed(_needed(metric, est, limit), sd, sd, settings.confidence)
    side = "base" if est.sd_base is not None else "new"
    return f"{why}: {_more(k, f'the {side} side’s start-to-start spread')}"


def judge(metric: Metric, est: Estimate, threshold: float | None, settings: Settings
          ) -> tuple[str, str]:
    """(state, reason) of one metric in one group; ``threshold`` None: not gated (the state
    then says only whether the interval excludes no change)."""
    if metric.better == ZERO:
        if est.new is None:
            return INCONCLUSIVE, "no value in the new run"
        if est.new > 0:
            return REGRESSED, f"{est.new:g} {metric.unit} in the new run (must be 0)"
        return (IMPROVED, "0 now") if (est.base or 0) > 0 else (NO_CHANGE, "0 in both")
    if est.base is None and est.new is None:
        return NOT_AVAILABLE, "no value in either run"
    if est.base is None or est.new is None:
        return INCONCLUSIVE, f"no value in the {'base' if est.base is None else 'new'} run"
    limit = 0.0 if threshold is None else threshold
    if est.change is None or est.low is None or est.high is None:
        return INCONCLUSIVE, _one_start(metric, est, limit, settings)
    worse_low, worse_high = sorted((metric.worse(est.low), metric.worse(est.high)))
    exact = est.low == est.high
    change = metric.worse(est.change)
    what = "exact: every repetition of each side gave one value" if exact else \
        "interval excludes no change"
    if worse_low > 0 and change > limit:
        return REGRESSED, f"worse beyond the threshold, {what}"
    if worse_high < 0 and -change > limit:
        return IMPROVED, f"better beyond the threshold, {what}"
    if threshold is None:
        return NO_CHANGE, "interval includes no change (not gated)"
    if worse_high <= limit:
        if exact:
            return NO_CHANGE, ("the same in every repetition" if change == 0 else
                               "an exact change within the threshold")
        return NO_CHANGE, "interval rules out a regression beyond the threshold"
    can = detectable_change(metric, est, threshold, settings)
    if can is not None and metric.worse(can) <= settings.detect * limit:
        return NO_CHANGE, (f"no significant change; a regression of {_fmt(metric, can)} would "
                           f"be caught 90% of the time")
    return INCONCLUSIVE, _underpowered(metric, est, limit, settings)


def unpaired_rows(base: Side, new: Side, thresholds: Thresholds,
                  metrics: Iterable[Metric] = METRICS.values()) -> list[dict]:
    rows = []
    settings = thresholds.settings
    metrics = list(metrics)
    for key in [k for k in base.groups if k in new.groups]:
        for metric in metrics:
            threshold = thresholds.threshold(metric.name, key)
            est = estimate(metric, base.groups[key], new.groups[key], level=settings.confidence,
                           min_requests=settings.min_requests)
            state, reason = judge(metric, est, threshold, settings)
            rows.append({"path": key[0], "modality": key[1], "salt_mode": key[2],
                         "metric": metric.name, "unit": metric.unit, "better": metric.better,
                         "change_unit": metric.change, "base": est.base, "new": est.new,
                         "change": est.change, "low": est.low, "high": est.high,
                         "n_base": est.n_base, "n_new": est.n_new,
                         "reps_base": est.reps_base, "reps_new": est.reps_new,
                         "threshold": format_threshold(metric, threshold),
                         "detectable": detectable_change(metric, est, threshold, settings),
                         "gated": threshold is not None, "state": state, "reason": reason})
    return rows
