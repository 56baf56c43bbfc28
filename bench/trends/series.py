"""Many runs as series: the entries (each a run directory, or a directory of runs: one per
server start, as a side of ``compare``), ordered by vLLM version, date or as given; per
headline metric x path x modality x salt mode each entry's value with its interval over
server starts (:func:`bench.compare.intervals.interval`: the statistics of ``compare``);
per entry the tenant boundary's worst verdict per channel (the verdict strip).

Entries must measure the same thing (:mod:`bench.compare.comparability`), the vLLM version
aside and what ``allow`` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from bench.compare.comparability import check
from bench.compare.intervals import interval
from bench.compare.samples import Group, GroupKey, Side, load_side
from bench.errors import BenchError
from bench.outputs import REPORT_PAGE, RESULTS_FILE
from bench.registry import ZERO, Metric
from bench.verdicts.boundary import channels_worst
from bench.vocab import CHANNELS

#: How entries are ordered: by vLLM version (dev builds by their commit count), by the
#: date of their first run, or as given.
VERSION, DATE, GIVEN = "version", "date", "given"
ORDERS = (VERSION, DATE, GIVEN)


@dataclass
class Entry:
    """One point of every series: a run, or a set of runs of one build."""

    side: Side
    index: int = 0
    #: How the dashboard names it: its vLLM version, or its run id where versions repeat.
    label: str = ""

    @property
    def metadata(self) -> dict:
        return self.side.results["metadata"]

    @property
    def version(self) -> str | None:
        return self.metadata.get("target", {}).get("vllm_version")

    @property
    def date(self) -> str:
        return min(r.results["metadata"].get("date") or "" for r in self.side.runs)

    @property
    def reports(self) -> list[Path]:
        """Per run its report page where ``report`` wrote one beside it, else its results."""
        return [r.dir / REPORT_PAGE if (r.dir / REPORT_PAGE).exists() else r.dir / RESULTS_FILE
                for r in self.side.runs]

    def boundary(self) -> dict[str, str | None]:
        """The worst verdict per channel (KV, media content, timing) over the entry's runs;
        None for a channel no run judged (or no isolation experiment)."""
        isolation = self.side.isolation
        return dict.fromkeys(CHANNELS) if isolation is None else channels_worst(isolation)


def _version_key(entry: Entry) -> tuple:
    try:
        return (Version(entry.version or ""), entry.date)
    except InvalidVersion as e:
        raise BenchError(f"{entry.side.dir}: vLLM version {entry.version!r} cannot be "
                         f"ordered ({e}); use --order date or given") from None


def load_entries(paths: list[Path], order: str = VERSION, allow: list[str] | None = None
                 ) -> list[Entry]:
    """Each path an entry (a run directory or a directory of runs), ordered; refused
    (BenchError) when two entries measured different things."""
    if order not in ORDERS:
        raise BenchError(f"--order {order!r}: choose from {', '.join(ORDERS)}")
    if not paths:
        raise BenchError("no runs given")
    entries = [Entry(load_side(Path(p))) for p in paths]
    first = entries[0]
    for entry in entries[1:]:
        try:
            check(first.metadata, entry.metadata, ["target.vllm_version", *(allow or [])])
        except BenchError as e:
            raise BenchError(f"{entry.side.dir} against {first.side.dir}: {e}") from None
    if order == VERSION:
        entries.sort(key=_version_key)
    elif order == DATE:
        entries.sort(key=lambda e: e.date)
    versions = [e.version for e in entries]
    for i, entry in enumerate(entries):
        entry.index = i
        unique = entry.version and versions.count(entry.version) == 1
        entry.label = entry.version if unique else entry.side.runs[0].results["run_id"]
    return entries


def group_keys(entries: list[Entry]) -> list[GroupKey]:
    """Every path x modality x salt mode any entry measured, in first-seen order."""
    return list(dict.fromkeys(k for e in entries for k in e.side.groups))


def point(metric: Metric, entry: Entry, key: GroupKey, level: float, min_requests: int = 1
          ) -> dict:
    """One entry's value of ``metric`` for ``key`` and its interval over server starts
    (bounds None with one start unless every repetition agreed); all None where it lacks
    the group or the value."""
    group = entry.side.groups.get(key)
    value, low, high = (interval(metric, group, level=level, min_requests=min_requests)
                        if group is not None else (None, None, None))
    return {"entry": entry.index, "value": value, "low": low, "high": high,
            "starts": len(set(group.starts)) if group is not None else 0}


def pooled(groups: list[Group]) -> Group:
    """Several entries' groups as one side: their repetitions together, each keeping its
    own server start (renumbered so that no two entries share one)."""
    out, offset = Group(), 0
    for g in groups:
        out.requests += g.requests
        out.rows += g.rows
        out.ids += g.ids
        out.starts += [offset + s for s in g.starts]
        out.units += [(offset + s, b, r) for s, b, r in g.units]
        offset += max(g.starts, default=-1) + 1
    return out


def trended(metrics: list[Metric]) -> list[Metric]:
    """The metrics drawn as series (a must-be-zero count is the verdict strip's)."""
    return [m for m in metrics if m.better != ZERO]
