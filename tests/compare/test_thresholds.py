"""Thresholds files: direction-aware values, overrides, and errors that name file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.compare.thresholds import format_threshold, load_thresholds
from bench.errors import BenchError
from bench.registry import METRICS


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gate.toml"
    path.write_text(text)
    return path


def test_defaults_come_from_the_registry() -> None:
    t = load_thresholds(None)
    assert t.metrics == {m.name: m.threshold for m in METRICS.values()}
    assert t.settings.isolation == "must-hold" and t.settings.inconclusive == "fail"


def test_values_overrides_and_off(tmp_path: Path) -> None:
    t = load_thresholds(_write(tmp_path, """
confidence = 0.99
isolation = "report"
inconclusive = "report"
[metrics]
p99_ttft_ms = "+10%"
hit_rate = "-2.5pp"
request_throughput = "-5%"
mean_tpot_ms = "off"
[[override]]
path = "generate-features"
modality = "video"
p99_ttft_ms = "+25%"
"""))
    assert t.settings.confidence == 0.99 and t.settings.isolation == "report"
    assert t.settings.inconclusive == "report"
    assert t.metrics["hit_rate"] == 2.5 and t.metrics["request_throughput"] == pytest.approx(0.05)
    assert t.metrics["mean_tpot_ms"] is None
    assert t.threshold("p99_ttft_ms", ("chat", "video", "none")) == pytest.approx(0.10)
    assert t.threshold("p99_ttft_ms", ("generate-features", "video", "salted")) == pytest.approx(0.25)
    assert t.threshold("p99_ttft_ms", ("generate-features", "image", "salted")) == pytest.approx(0.10)
    assert format_threshold(METRICS["hit_rate"], 2.5) == "-2.5pp"
    assert format_threshold(METRICS["p99_ttft_ms"], 0.25) == "+25%"


@pytest.mark.parametrize(("text", "message"), [
    ('[metrics]\np99_ttft_ms = "-10%"', "lower-is-better"),
    ('[metrics]\nrequest_throughput = "+10%"', "higher-is-better"),
    ('[metrics]\nhit_rate = "-2%"', "changes in pp"),
    ('[metrics]\nttft_p99_ms = "+10%"', "did you mean 'p99_ttft_ms'"),
    ('[metrics]\nleaked_tokens = "+1%"', "must be 0"),
    ('[metrics]\np99_ttft_ms = "ten"', "not a threshold"),
    ('isolation = "sometimes"', "must-hold, report"),
    ('confidance = 0.9', "did you mean 'confidence'"),
    ('confidence = 2.0', "between 0.5 and 1"),
    ('max_cv = 0.3', "max_cv was removed: a spread across repetitions no longer"),
    ('resamples = 2000', "resamples was removed"),
    ('min_requests = 0', "at least 1"),
    ('inconclusive = "pass"', "fail, report"),
    ('[metrics]\nrequest_throughput = "-100%"', "below 100%"),
    ('[[override]]\np99_ttft_ms = "+1%"', r"override\[0\]: name at least one of"),
    ('[metrics\n', "not valid TOML"),
])
def test_bad_files_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(BenchError, match=message) as err:
        load_thresholds(path)
    assert str(path) in str(err.value)
