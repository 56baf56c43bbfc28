"""``capacity``'s bad input is refused before any server starts, naming the flag."""

from __future__ import annotations

import pytest

from bench.campaigns.capacity import salting_cost
from bench.cli import main


@pytest.mark.parametrize(("argv", "says"), [
    (["--goodput", "ttft:500", "--attainment", "1.5"], "--attainment 1.5: a share"),
    (["--goodput", "latency:500"], "--goodput: unknown objective 'latency'"),
])
def test_bad_input_names_the_flag(argv: list[str], says: str, capsys):
    assert main(["capacity", "--server-url", "http://127.0.0.1:9", *argv]) == 2
    assert says in capsys.readouterr().err


def test_objectives_are_required(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["capacity", "--server-url", "http://127.0.0.1:9"])
    assert stop.value.code == 2 and "--goodput" in capsys.readouterr().err


def test_salting_cost_interval_from_the_two_brackets():
    cost = salting_cost({"low": 10.0, "high": 11.0}, {"low": 5.0, "high": 6.0})
    assert cost == pytest.approx({"low": 1 - 6 / 10, "high": 1 - 5 / 11, "point": 0.5})
    assert salting_cost({"low": None, "high": 2.0}, {"low": 1.0, "high": 2.0})["low"] is None
