"""Service-level objectives as ``vllm bench serve --goodput`` takes them (its parity on the
same requests: ``test_goodput_engine``)."""

import pytest

from bench.errors import BenchError
from bench.goodput import describe, is_good, parse_slos
from bench.options import options_from
from bench.run.settings import RunOptions


def test_objectives_parse_as_vllm_bench_serve_takes_them():
    assert parse_slos(["ttft:500", "tpot:50.5", "e2el:0"]) == {"ttft": 500.0, "tpot": 50.5,
                                                                "e2el": 0.0}
    assert describe({"tpot": 50.0, "ttft": 500.0}) == "ttft <= 500 ms, tpot <= 50 ms"


@pytest.mark.parametrize(("pair", "says"), [
    ("ttft", "is not KEY:MS"), ("ttft:fast", "is not KEY:MS"), ("itl:5", "unknown objective 'itl'"),
    ("ttft:-1", "non-negative"),
])
def test_a_bad_objective_names_the_flag_and_the_pair(pair: str, says: str):
    with pytest.raises(BenchError, match=f"^--goodput: .*{says}"):
        parse_slos([pair])


def test_a_failed_request_is_never_good():
    assert not is_good({"ok": False}, {"ttft": 1e9})
    assert is_good({"ok": True, "ttft_ms": 1.0, "e2el_ms": 9.0, "output_tokens": 0}, {"tpot": 0})


def test_run_options_carry_the_objectives():
    from bench.cli import build_parser

    args = build_parser("run").parse_args(["run", "--goodput", "ttft:500", "e2el:2000"])
    assert options_from(args).goodput == {"ttft": 500.0, "e2el": 2000.0}
    assert RunOptions(paths=["chat"]).goodput is None
