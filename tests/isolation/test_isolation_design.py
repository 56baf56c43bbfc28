"""The isolation experiment's design and side-channel rows (no engine)."""

from __future__ import annotations

import pytest

from bench.isolation.experiment import IsolationOptions, cells_of
from bench.isolation.side_channel import auc, auc_interval, summarize


def test_auc_and_interval() -> None:
    assert auc([3, 4], [1, 2]) == 1.0
    assert auc([1, 2], [3, 4]) == 0.0
    assert auc([1, 2], [1, 2]) == 0.5
    low, high = auc_interval([3, 4, 5, 6], [1, 2, 3, 4])
    assert 0 <= low <= auc([3, 4, 5, 6], [1, 2, 3, 4]) <= high <= 1
    row = summarize("chat", "image", "x", [10, 11, 12, 13], [1, 2, 3, 4])
    assert row["auc"] == 1.0 and row["distinguishable"] is True
    same = summarize("chat", "image", "x", [1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1])
    assert same["auc"] == pytest.approx(0.5) and same["distinguishable"] is False
    assert summarize("chat", "image", "x", [1], [2])["auc"] is None


def test_token_only_path_gets_text_cells_only() -> None:
    cells = cells_of(IsolationOptions())
    assert ("generate-tokens", "text") in cells
    assert ("generate-tokens", "image") not in cells
    assert ("generate-parts", "video") in cells
