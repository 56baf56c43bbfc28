"""One exit code for a matrix: a problem found outranks one that could not be judged."""

import pytest

from bench.campaigns.matrix import matrix_exit
from bench.vocab import worst_exit


def _engine(**kw) -> dict:
    return {"engine": "e", "status": "ok", "problems": [], "isolation_exit": 0, **kw}


@pytest.mark.parametrize(("codes", "code"), [([], 0), ([0, 0], 0), ([0, 2], 2), ([2, 1], 1),
                                             ([1, 2, 0], 1)])
def test_worst_exit(codes: list[int], code: int):
    assert worst_exit(codes) == code


def test_problems_of_a_lone_engine_fail_the_matrix():
    """Before, a matrix of one engine whose run failed requests exited 0."""
    doc = {"engines": [_engine(problems=["3 measured request(s) failed"])], "comparisons": []}
    assert matrix_exit(doc) == 1


def test_a_leak_outranks_an_engine_that_could_not_run():
    doc = {"engines": [_engine(status="n/a"), _engine(isolation_exit=1)], "comparisons": []}
    assert matrix_exit(doc) == 1
    doc["engines"][1]["isolation_exit"] = 0
    assert matrix_exit(doc) == 2
    doc = {"engines": [_engine(), _engine()], "comparisons": [{"exit_code": 2}]}
    assert matrix_exit(doc) == 2
