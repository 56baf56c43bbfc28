"""The tenant boundary as a whole: per path x modality one verdict per channel (KV cache,
media content, timing), the policy of which channels fail a run, and the run's exit code.

Channels and their words are :mod:`bench.vocab`'s (``CHANNELS``, ``CHANNEL_VERDICTS``).
A cell's KV verdict is the worst of its own and its uuid probe's salt verdict; content is
the uuid probe's (:func:`bench.verdicts.isolation.content_verdict`); timing is the
cross-tenant side-channel row's: EXPOSED (evidence, Holm-adjusted), NOT DETECTED (no
evidence, at a power that would have seen the target AUC), UNDERPOWERED (no evidence, and
it could not have seen it), ERROR (too few pairs). A channel the cell can carry but the
run did not probe is NOT PROBED; one it cannot carry (text; content on a path without
uuids) is n/a.

Exit code, failing closed: 1 when a channel the policy fails on has a finding (LEAK,
UNDER-HIT, SUBSTITUTED, EXPOSED); else 2 when one of them could not be judged (ERROR,
UNDERPOWERED, NOT PROBED) or no KV cell was judged; else 0. Other channels are reported.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.errors import BenchError
from bench.stats import DISTINGUISHABLE, NO_EVIDENCE, POWER_TARGET
from bench.verdicts.isolation import content_verdict, worst
from bench.vocab import (
    CHANNEL_VERDICTS,
    CHANNELS,
    CONTENT,
    DEFAULT_FAIL_ON,
    ERROR,
    EXIT_CANNOT_JUDGE,
    EXIT_FOUND,
    EXIT_OK,
    EXPOSED,
    KV,
    LEAK,
    NOT_AVAILABLE,
    NOT_DETECTED,
    NOT_PROBED,
    SUBSTITUTED,
    TIMING,
    UNDER_HIT,
    UNDERPOWERED,
    worst_exit,
)

#: Verdicts that are a finding, and verdicts that mean the channel could not be judged.
FOUND = frozenset({LEAK, UNDER_HIT, SUBSTITUTED, EXPOSED})
CANNOT_JUDGE = frozenset({ERROR, UNDERPOWERED, NOT_PROBED})
#: The side-channel rows that test a channel across tenants (bench.isolation.side_channel).
CROSS_TENANT = "cross-tenant-media"


def parse_fail_on(value: str | Iterable[str], where: str = "--fail-on") -> tuple[str, ...]:
    """The channels a policy fails on, in :data:`CHANNELS` order, from a comma list or a
    list (``none``: report every channel, fail on none)."""
    names = [v.strip() for v in (value.split(",") if isinstance(value, str) else value)]
    names = [n for n in names if n and n != "none"]
    unknown = [n for n in names if n not in CHANNELS]
    if unknown:
        raise BenchError(f"{where}: unknown channel(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(CHANNELS)} or none")
    return tuple(c for c in CHANNELS if c in names)


def policy(isolation: dict) -> tuple[str, ...]:
    """The channels the run's policy fails on (recorded in its options; else the default)."""
    recorded = isolation.get("metadata", {}).get("isolation_options", {}).get("fail_on")
    return DEFAULT_FAIL_ON if recorded is None else tuple(recorded)


def timing_verdict(row: dict | None, carried: bool) -> str:
    """A cross-tenant side-channel row's verdict (``carried``: the cell has media)."""
    if row is None:
        return NOT_PROBED if carried else NOT_AVAILABLE
    if row.get("finding") == DISTINGUISHABLE:
        return EXPOSED
    if row.get("finding") == NO_EVIDENCE:
        detectable = row.get("min_detectable_auc")
        powered = detectable is not None and detectable <= POWER_TARGET["target_auc"]
        return NOT_DETECTED if powered else UNDERPOWERED
    return ERROR


def _content(probe: dict) -> str:
    """A uuid probe's media-content verdict; judged from its steps when it was written
    before the verdict existed."""
    if "content" in probe:
        return probe["content"]
    return content_verdict(probe["steps"])[0] if "steps" in probe else NOT_PROBED


def boundary_rows(isolation: dict) -> list[dict]:
    """One row per isolation cell: its verdict per channel and the timing figures."""
    options = isolation.get("metadata", {}).get("isolation_options", {})
    probes = {(u["path"], u.get("modality", "image"), u.get("replica")): u
              for u in isolation.get("uuid_probe", [])}
    timed = {(r["path"], r["modality"], r.get("replica")): r
             for r in isolation.get("side_channel", []) if r.get("kind") == CROSS_TENANT}
    uuid_paths = set(options.get("uuid_paths", [u["path"] for u in probes.values()]))
    rows = []
    for cell in isolation.get("cells", []):
        replica = cell.get("replica")
        key = (cell["path"], cell["modality"], replica)
        media = cell["verdict"] != NOT_AVAILABLE and cell["modality"] != "text"
        probe, timing = (probes.get(key), timed.get(key)) if media else (None, None)
        kv = worst([cell["verdict"], *([probe["verdict"]] if probe else [])]) or NOT_AVAILABLE
        content = (_content(probe) if probe else
                   NOT_PROBED if media and cell["path"] in uuid_paths else NOT_AVAILABLE)
        leaked = (cell.get("leaked_tokens") or 0) + ((probe or {}).get("leaked_tokens") or 0)
        rows.append({"path": cell["path"], "modality": cell["modality"], "replica": replica,
                     KV: kv, "leaked_tokens": leaked, CONTENT: content,
                     TIMING: timing_verdict(timing, media),
                     "content_reason": probe and probe.get("content_reason"),
                     **{k: (timing or {}).get(k) for k in
                        ("auc", "ci_low", "ci_high", "min_detectable_auc", "p_adjusted",
                         "guess")}})
    return rows


def per_cell(rows: list[dict]) -> list[dict]:
    """The rows of one path x modality (one per replica behind a router) as one: per
    channel the worst verdict, with the figures of the replica whose timing is worst,
    leaked tokens summed, and per channel the replicas with a finding (``found_on``)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["path"], row["modality"]), []).append(row)
    out = []
    for group in groups.values():
        verdicts = {c: channel_worst(group, c) or NOT_AVAILABLE for c in CHANNELS}
        shown = max(group, key=lambda r: (r[TIMING] == verdicts[TIMING], r.get("auc") or 0))
        out.append({**shown, **verdicts, "replica": None,
                    "leaked_tokens": sum(r["leaked_tokens"] for r in group),
                    "found_on": {c: [r["replica"] for r in group
                                     if r["replica"] is not None and r[c] in FOUND]
                                 for c in CHANNELS}})
    return out


def channel_worst(rows: list[dict], channel: str) -> str | None:
    """The most severe verdict of ``channel`` across ``rows`` (n/a skipped)."""
    present = {r[channel] for r in rows}
    return next((v for v in CHANNEL_VERDICTS[channel] if v in present), None)


def channels_worst(isolation: dict) -> dict[str, str | None]:
    """Per channel its most severe verdict across the run's cells (routed cells count as KV
    cells); None for a channel nothing judged."""
    rows = boundary_rows(isolation)
    routed = [{KV: c["verdict"]} for c in isolation.get("routed", [])]
    return {c: channel_worst(rows + (routed if c == KV else []), c) for c in CHANNELS}


def _code(verdict: str | None) -> int:
    return (EXIT_FOUND if verdict in FOUND else EXIT_CANNOT_JUDGE if verdict in CANNOT_JUDGE
            else EXIT_OK)


def exit_code(isolation: dict, fail_on: Iterable[str] | None = None) -> int:
    """The run's exit code under ``fail_on`` (default: the run's :func:`policy`): per gated
    channel its worst verdict's code (one precedence, whether the findings are in one cell
    or several; routed cells count as KV cells), the worst code across channels."""
    fail_on = policy(isolation) if fail_on is None else tuple(fail_on)
    found = channels_worst(isolation)
    codes = [EXIT_OK if worst(c["verdict"] for c in isolation.get("cells", []))
             else EXIT_CANNOT_JUDGE]
    codes += [_code(found[channel]) for channel in fail_on]
    return worst_exit(codes)
