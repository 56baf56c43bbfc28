"""The capacity campaign through saltbench's own runner, against the zero-work server made a
server of known capacity: one slot held 100 ms per request (10 requests/s). Nothing here
is evidence of how vLLM behaves; only that probes, goodput, the search and the report fit
together."""

from __future__ import annotations

import json
import math
from pathlib import Path

from rich.console import Console

from bench.campaigns.capacity import CAPACITY_FILE, run_capacity
from bench.capacity.search import CONVERGED, SearchSettings
from bench.engine.open import open_target
from bench.options import target_args
from bench.report.capacity import capacity_chart, capacity_markdown, load_points
from bench.results import read_results
from bench.run.settings import RunOptions
from bench.zerowork import ZeroWorkServer


def test_the_search_finds_a_servers_known_capacity(tmp_path: Path) -> None:
    opts = RunOptions(paths=["chat"], salt_modes=["none", "salted"], warmup=0,
                      burstiness=math.inf, goodput={"ttft": 200.0})
    with ZeroWorkServer(prefill_ms=100.0, output_tokens=2) as server, \
            open_target(target_args(server_url=server.url)) as target:
        doc = run_capacity(target, "clientbench-text", opts,
                           SearchSettings(target=0.9, start=4.0, requests=40),
                           tmp_path, "capacity", Console(stderr=True))
    assert json.loads((tmp_path / CAPACITY_FILE).read_text()) == json.loads(json.dumps(doc))
    assert doc["complete"] and [r["salt_mode"] for r in doc["rows"]] == ["none", "salted"]
    for row in doc["rows"]:
        assert row["stopped"] == CONVERGED
        # Above 10/s the queue grows ~(100 - 1000/rate) ms per request: with 100 ms of
        # slack the 36th of 40 requests misses 200 ms from about 10.3/s; client and server
        # overheads only lower that.
        assert 8.0 <= row["low"] < row["high"] <= 11.5
        runs = sorted((tmp_path / f"chat-{row['salt_mode']}").glob("probe-*/results.json"))
        assert len(runs) == len(row["probes"]) == len(row["probe_log"])
        # Every probe is a run of its own: nothing cached from another probe.
        assert all(read_results(p)["passes"][0]["cached_tokens"] == 0 for p in runs)
    (cost,) = doc["costs"]
    assert cost["low"] <= 0.0 <= cost["high"]  # the same server: no cost to be told
    text = capacity_markdown(doc)
    assert "Salting costs" in text and "| chat | none |" in text
    for row in doc["rows"]:  # the capacity row, then one row per load with its hit rate
        assert text.count(f"| chat | {row['salt_mode']} |") == 1 + len(row["loads"])
    assert [x["rate"] for x in load_points(doc["rows"][0])] == sorted(
        x["rate"] for x in doc["rows"][0]["loads"])
    assert all(x["hit_rate"] == 0.0 for x in load_points(doc["rows"][0]))  # nothing repeats
    assert all(p.stat().st_size for p in capacity_chart(doc, tmp_path))
