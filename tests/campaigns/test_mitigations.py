"""The mitigations campaign's own logic (no engine): configurations, the per-configuration
summary, a configuration that cannot run."""

from __future__ import annotations

import argparse
import json
from contextlib import contextmanager

import pytest
from rich.console import Console

from bench.campaigns import mitigations as mit
from bench.errors import BenchError
from bench.isolation.experiment import IsolationOptions
from bench.report.mitigations import mitigation_table


def test_parse_config() -> None:
    assert mit.parse_config("off=--mm-processor-cache-gb=0") == mit.Config(
        "off", ("--mm-processor-cache-gb=0",))
    assert mit.parse_config("both=--a=1 client-uuids=per-tenant") == mit.Config(
        "both", ("--a=1",), "per-tenant")
    assert mit.parse_config("stock=") == mit.Config("stock")
    for bad, message in (("nothing", "NAME=ARGS"), ("x=client-uuids=other", "must be one of"),
                         ("x=flag", "neither a --serve-flag")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            mit.parse_config(bad)


def isolation(content: str, finding: str) -> dict:
    cells = [{"path": "chat", "modality": m, "verdict": "ISOLATED", "leaked_tokens": 0}
             for m in ("text", "image", "audio")]
    return {"metadata": {"isolation_options": {"uuid_paths": ["chat"]},
                         "target": {"server_start_s": 80.0}},
            "duration_s": 100.0, "cells": cells,
            "uuid_probe": [{"path": "chat", "modality": m, "verdict": "ISOLATED",
                            "leaked_tokens": 0, "content": content} for m in ("image", "audio")],
            "side_channel": [{"path": "chat", "modality": m, "kind": "cross-tenant-media",
                              "finding": finding, "auc": auc, "min_detectable_auc": 0.7,
                              "n_a": 3, "ttft_a_ms": [300.0, 310.0, 320.0],
                              "ttft_b_ms": [150.0, 160.0, 170.0]}
                             for m, auc in (("image", 1.0), ("audio", 0.9))]}


def test_summary_counts_each_channel_and_the_cost() -> None:
    row = mit.summarize(mit.Config("default"), isolation("SUBSTITUTED", "distinguishable"))
    assert row["channels"]["media-content"] == {"worst": "SUBSTITUTED",
                                                "counts": {"SUBSTITUTED": 2}}
    assert row["channels"]["kv-cache"]["counts"] == {"ISOLATED": 3}
    assert row["channels"]["timing"]["worst"] == "EXPOSED"
    assert row["timing_auc"] == {"min": 0.9, "max": 1.0} and row["pairs"] == 6
    assert (row["ttft_seen_ms"], row["ttft_unseen_ms"]) == (160.0, 310.0)
    assert row["exit_code"] == 1
    closed = mit.summarize(mit.Config("x"), isolation("ISOLATED", "no evidence"))
    assert closed["channels"]["timing"]["worst"] == "NOT DETECTED" and closed["exit_code"] == 0


def test_a_configuration_that_cannot_run_is_na_and_the_rest_run(monkeypatch, tmp_path) -> None:
    @contextmanager
    def open_target(args, console):
        if args.serve_args:
            raise BenchError("--serve-arg: vLLM 0.32.0 does not accept --nope")
        yield "target"

    monkeypatch.setattr(mit, "open_target", open_target)
    monkeypatch.setattr(mit, "isolate", lambda target, opts, out, run_id, console: isolation(
        "ISOLATED" if opts.client_uuids == "per-tenant" else "SUBSTITUTED", "no evidence"))
    configs = [mit.Config("bad", ("--nope",)), mit.Config("tenant", client_uuids="per-tenant")]
    doc = mit.run_mitigations(argparse.Namespace(serve_args=[]), configs, IsolationOptions(),
                              tmp_path, Console(quiet=True))
    bad, tenant = doc["rows"]
    assert bad["status"] == "n/a" and "does not accept --nope" in bad["reason"]
    assert tenant["status"] == "ok" and tenant["channels"]["media-content"]["worst"] == "ISOLATED"
    assert json.loads((tmp_path / mit.MITIGATIONS_FILE).read_text())["complete"]
    table = mitigation_table(doc)
    assert table.rows[0][2:5] == ["n/a"] * 3 and table.rows[1][4] == "NOT DETECTED (2/2)"
