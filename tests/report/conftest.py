import json
import shutil
from pathlib import Path

import pytest

from bench import SCHEMA_VERSION

FIXTURE = Path(__file__).parents[1] / "fixtures" / "run-smoke"


def synthetic_isolation(run_id: str, metadata: dict) -> dict:
    """A SYNTHETIC isolation.json (made-up verdicts and AUCs) for the chart code paths."""
    verdicts = {("chat", "image"): ("ISOLATED", 0), ("chat", "audio"): ("LEAK", 64),
                ("generate-parts", "image"): ("UNDER-HIT", 0),
                ("generate-parts", "audio"): ("ERROR", 0)}
    return {
        "schema_version": SCHEMA_VERSION, "kind": "saltbench-isolation", "run_id": run_id,
        "metadata": metadata, "duration_s": 1.0,
        "cells": [{"path": p, "modality": m, "verdict": v, "leaked_tokens": n,
                   "reason": "synthetic | test" if v == "ERROR" else None,
                   "steps": [{"name": "same-salt-repeat", "expected": 96, "cached": 96,
                              "prompt_tokens": 99, "ok": True}]}
                  for (p, m), (v, n) in verdicts.items()],
        "uuid_probe": [{"path": "chat", "modality": "image", "verdict": "ISOLATED",
                        "leaked_tokens": 0, "content": "SUBSTITUTED",
                        "content_reason": "synthetic", "same_salt_cached_tokens": 96,
                        "cross_salt_cached_tokens": 0, "mm_cache_hits": 1,
                        "finding": "synthetic"}],
        "side_channel": [{"path": p, "modality": m, "kind": k, "auc": auc,
                          "ci_low": auc - 0.1, "ci_high": min(auc + 0.08, 1.0), "n_a": 20,
                          "n_b": 20, "p_adjusted": 0.01 if auc > 0.9 else 0.6,
                          "min_detectable_auc": 0.74,
                          "finding": "distinguishable" if auc > 0.9 else "no evidence"}
                         for (p, m), k, auc in [(("chat", "image"), "cross-tenant-media", 0.52),
                                                (("chat", "image"), "unsalted-hit-vs-miss", 0.93),
                                                (("generate-parts", "audio"),
                                                 "cross-tenant-media", 0.48)]],
    }


@pytest.fixture
def fixture_run() -> Path:
    return FIXTURE


@pytest.fixture
def isolated_run(tmp_path: Path) -> Path:
    """A tmp copy of the real fixture run plus a synthetic isolation.json."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    results = json.loads((run / "results.json").read_text())
    iso = synthetic_isolation(results["run_id"], results["metadata"])
    (run / "isolation.json").write_text(json.dumps(iso))
    return run
