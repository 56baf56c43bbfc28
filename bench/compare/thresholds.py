"""Gate thresholds: defaults from :mod:`bench.registry`, overridden by a TOML file.

::

    confidence = 0.95        # interval level
    min_requests = 1         # requests a repetition needs to count (per-request metrics)
    isolation = "must-hold"  # or "report": an isolation verdict lost fails the gate
    isolation_fail_on = ["kv-cache", "media-content"]  # boundary channels gated (or [])
    inconclusive = "fail"    # or "report": a gated inconclusive metric fails (exit 2)

    [metrics]                # the tolerated change in the bad direction, or "off"
    p99_ttft_ms = "+10%"     # lower is better: a rise is bad
    request_throughput = "-5%"
    hit_rate = "-2pp"        # percentage points

    [[override]]             # for one path / modality / salt mode (omitted: any)
    path = "generate-features"
    modality = "video"
    p99_ttft_ms = "+25%"
"""

from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from bench.errors import BenchError
from bench.registry import HIGHER, LOWER, METRICS, POINTS, ZERO, Metric
from bench.verdicts.boundary import parse_fail_on
from bench.vocab import DEFAULT_FAIL_ON

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPORT = "report"
ISOLATION_RULES = ("must-hold", REPORT)
INCONCLUSIVE_RULES = ("fail", REPORT)
OFF = "off"
#: Settings that no longer exist, and why (an error names them rather than ignore them).
REMOVED = {
    "max_cv": "a spread across repetitions no longer makes a metric inconclusive: the "
              "interval, computed over server starts, carries it",
    "resamples": "intervals are t intervals over server starts, not a bootstrap",
    "min_repetitions": "an interval always needs 2 server starts (runs) per side",
}
_THRESHOLD = re.compile(r"^(?P<sign>[+-])(?P<value>\d+(\.\d+)?)\s*(?P<unit>%|pp)$")
_MATCH_KEYS = ("path", "modality", "salt_mode")


@dataclass(frozen=True)
class Settings:
    confidence: float = 0.95
    min_requests: int = 1  # a repetition with fewer (having the metric's value) is left out
    isolation: str = "must-hold"
    #: The tenant-boundary channels whose loss fails the gate (bench.verdicts.boundary).
    isolation_fail_on: tuple[str, ...] = DEFAULT_FAIL_ON
    inconclusive: str = "fail"
    #: A row is powered when it would catch a regression of this many times its threshold
    #: (90% of the time); else it says "underpowered" (:mod:`bench.compare.power`).
    detect: float = 2.0


@dataclass
class Thresholds:
    """What a comparison tolerates; ``None`` means a metric is reported, not gated."""

    settings: Settings = field(default_factory=Settings)
    metrics: dict[str, float | None] = field(
        default_factory=lambda: {m.name: m.threshold for m in METRICS.values()})
    overrides: list[tuple[dict[str, str], dict[str, float | None]]] = field(default_factory=list)
    source: str | None = None

    def threshold(self, metric: str, key: tuple[str, str, str]) -> float | None:
        """The threshold of ``metric`` for a (path, modality, salt mode) group."""
        value = self.metrics[metric]
        for match, values in self.overrides:
            if metric in values and all(key[_MATCH_KEYS.index(k)] == v for k, v in match.items()):
                value = values[metric]
        return value


def format_threshold(metric: Metric, value: float | None) -> str:
    """``+10%``, ``-2pp``, ``must be 0`` or ``off``, signed in the bad direction."""
    if value is None:
        return OFF
    if metric.better == ZERO:
        return "must be 0"
    sign = "+" if metric.better == LOWER else "-"
    return f"{sign}{value:g}pp" if metric.change == POINTS else f"{sign}{value * 100:g}%"


def parse_threshold(metric: Metric, text: object, where: str) -> float | None:
    """A threshold string for ``metric``: a fraction (``%``), points (``pp``) or ``None``."""
    if text == OFF:
        return None
    if metric.better == ZERO:
        if text in (0, "0", "must-be-zero"):
            return 0.0
        raise BenchError(f"{where}: {metric.name} must be 0; write \"must-be-zero\" or \"off\"")
    match = _THRESHOLD.match(str(text).strip()) if isinstance(text, str) else None
    bad_sign = "+" if metric.better == HIGHER else "-"
    example = format_threshold(metric, metric.threshold)
    if not match:
        raise BenchError(f"{where}: {text!r} is not a threshold; write e.g. \"{example}\" "
                         f"or \"off\"")
    if match["sign"] == bad_sign:
        better = "lower" if metric.better == LOWER else "higher"
        raise BenchError(f"{where}: {metric.name} is {better}-is-better, so its threshold is "
                         f"a change in the bad direction, e.g. \"{example}\" (not {text!r})")
    if match["unit"] != metric.change:
        raise BenchError(f"{where}: {metric.name} changes in {metric.change}, e.g. "
                         f"\"{example}\" (not {text!r})")
    value = float(match["value"])
    if metric.better == HIGHER and metric.change != POINTS and value >= 100:
        raise BenchError(f"{where}: {metric.name} cannot drop by {text!r}: a relative drop is "
                         f"below 100%")
    return value if metric.change == POINTS else value / 100


def _metric(name: str, where: str) -> Metric:
    if name not in METRICS:
        close = difflib.get_close_matches(name, METRICS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(METRICS)}"
        raise BenchError(f"{where}: unknown metric {name!r}{hint}")
    return METRICS[name]


def _values(table: dict, where: str) -> dict[str, float | None]:
    return {name: parse_threshold(_metric(name, f"{where}.{name}"), text, f"{where}.{name}")
            for name, text in table.items()}


def _settings(doc: dict, path: Path) -> Settings:
    known = {f.name: f.type for f in fields(Settings)}
    settings = Settings()
    for key, value in doc.items():
        if key in REMOVED:
            raise BenchError(f"{path}: {key} was removed: {REMOVED[key]}; delete it")
        if key not in known:
            hint = difflib.get_close_matches(key, [*known, "metrics", "override"], n=1)
            raise BenchError(f"{path}: unknown key {key!r}"
                             + (f"; did you mean {hint[0]!r}?" if hint else ""))
        for name, rules in (("isolation", ISOLATION_RULES), ("inconclusive", INCONCLUSIVE_RULES)):
            if key == name and value not in rules:
                raise BenchError(f"{path}: {name} = {value!r}; choose from {', '.join(rules)}")
        if key == "isolation_fail_on":
            if not isinstance(value, list):
                raise BenchError(f"{path}: isolation_fail_on must be a list, got {value!r}")
            value = parse_fail_on(value, f"{path}: isolation_fail_on")
        expected = type(getattr(settings, key))
        if not isinstance(value, expected) and not (expected is float and isinstance(value, int)):
            raise BenchError(f"{path}: {key} must be a {expected.__name__}, got {value!r}")
        settings = replace(settings, **{key: value})
    if settings.min_requests < 1:
        raise BenchError(f"{path}: min_requests must be at least 1, got {settings.min_requests}")
    if settings.detect < 1:
        raise BenchError(f"{path}: detect must be at least 1, got {settings.detect}")
    if not 0.5 < settings.confidence < 1:
        raise BenchError(f"{path}: confidence must be between 0.5 and 1, got {settings.confidence}")
    return settings


def defaults(ab: bool = False) -> Thresholds:
    """The default thresholds of a comparison (``ab``: of a paired A/B)."""
    if not ab:
        return Thresholds()
    return Thresholds(metrics={m.name: m.ab_threshold for m in METRICS.values()})


def load_thresholds(path: Path | None, ab: bool = False) -> Thresholds:
    """Defaults (``ab``: an A/B's), or a TOML file's thresholds on top of them; errors name
    the file and key."""
    thresholds = defaults(ab)
    if path is None:
        return thresholds
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchError(f"--thresholds {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"{path}: not valid TOML: {exc}") from None
    metrics = doc.pop("metrics", {})
    overrides = doc.pop("override", [])
    if not isinstance(metrics, dict) or not isinstance(overrides, list):
        raise BenchError(f"{path}: [metrics] must be a table and [[override]] an array of tables")
    thresholds.settings = _settings(doc, path)
    thresholds.metrics.update(_values(metrics, f"{path}: metrics"))
    for i, table in enumerate(overrides):
        where = f"{path}: override[{i}]"
        match = {k: table.pop(k) for k in _MATCH_KEYS if k in table}
        if not match:
            raise BenchError(f"{where}: name at least one of {', '.join(_MATCH_KEYS)}")
        thresholds.overrides.append((match, _values(table, where)))
    thresholds.source = str(path)
    return thresholds
