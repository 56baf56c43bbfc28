"""``capacity``'s bad input is refused before any server starts, naming the flag."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest

from bench.campaigns.capacity import salting_cost
from bench.capacity.search import SearchSettings
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


def _row(capacity: float, rates: list[float], n: int = 2000) -> dict:
    """A search's row whose probes follow a logistic curve through 95% at ``capacity``."""
    def good(rate: float) -> int:
        return round(n / (1 + math.exp(8 * math.log(rate / capacity) - math.log(19))))

    return {"settings": asdict(SearchSettings()),
            "probes": [{"rate": r, "sent": n, "good": good(r)} for r in rates]}


def test_salting_cost_from_both_salt_modes_at_once():
    rates = [6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
    cost = salting_cost(_row(10.0, rates), _row(8.0, rates))
    assert cost["point"] == pytest.approx(0.2, abs=0.01) and cost["why"] == ""
    assert cost["low"] < 0.2 < cost["high"]
    same = salting_cost(_row(10.0, rates), _row(10.0, rates))
    assert same["low"] < 0.0 < same["high"]
    few = salting_cost(_row(10.0, rates[:2]), _row(8.0, rates))
    assert few["point"] is None and "fewer than 3" in few["why"]
