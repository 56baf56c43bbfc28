"""A run deadline, and ``run --resume``, on saltbench's own runner against a fake server.

Nothing here is evidence of how vLLM behaves (the engine tests are); only of what the
runner records when a run stops early and how it continues one.
"""

from __future__ import annotations

import asyncio
import os
import stat
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from fakeserver import FakeServer, _chat, metrics_text
from rich.console import Console

from bench.engine.target import Target
from bench.errors import BenchError
from bench.measured.records import read_records
from bench.results import read_results
from bench.run.resume import load_resume
from bench.run.secret import SECRET_FILE, read_secret
from bench.run.session import run_benchmark
from bench.run.settings import RunOptions
from bench.salts import derive, digest
from bench.vocab import Failure
from bench.workload import generate, load_workload

SPEC = """
[workload]
requests = 12
[tenants]
count = 3
salt = "tenant"
[arrival]
process = "constant"
rate = 1000.0
"""
DELAY_S = 0.1
RUN_ID = "20261203-000000-fake-abcdef"


async def _slow_chat(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(DELAY_S)
    return await _chat(request)


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="")


async def _metrics(request: web.Request) -> web.Response:
    return web.Response(text=metrics_text(1.0))


@pytest.fixture
def slow_server():
    """The fake server with a chat that takes DELAY_S before it answers, under /slow."""
    fake = FakeServer()
    fake.app.router.add_post("/slow/v1/chat/completions", _slow_chat)
    fake.app.router.add_get("/slow/health", _health)
    fake.app.router.add_get("/slow/metrics", _metrics)
    with fake:
        yield fake


@pytest.fixture
def workload(tmp_path: Path):
    spec = tmp_path / "tenants.toml"
    spec.write_text(textwrap.dedent(SPEC))
    return load_workload(generate(spec, out=tmp_path / "wl"))


def _target(server: FakeServer) -> Target:
    return Target(server.url + "/slow", "fake", 32, None,
                  {"managed": False, "block_size": 32, "model": "fake", "vllm_version": "x"})


def _run(server, workload, out: Path, deadline_s: float | None = None, resume=None) -> dict:
    opts = resume.options if resume else RunOptions(paths=["chat"], warmup=1,
                                                    deadline_s=deadline_s)
    return run_benchmark(_target(server), workload, opts, out, RUN_ID, Console(stderr=True),
                         resume)


def _measured(out: Path) -> list[dict]:
    return [r for r in read_records(out / "records.jsonl") if r["phase"] == "measure"]


def test_the_deadline_ends_the_run_on_time_with_every_request_accounted_for(
        slow_server, workload, tmp_path: Path) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    results = _run(slow_server, workload, out, deadline_s=0.55)
    took = time.monotonic() - started
    assert took < 0.55 + 2.0, f"the run took {took:.2f} s past a 0.55 s deadline"
    assert "deadline" in results["stopped"]
    records = _measured(out)
    assert len(records) == 2 * 12, "every measured request of both passes is recorded"
    kinds = Counter(r["failure"] for r in records if not r["ok"])
    assert kinds[Failure.DEADLINE] == 1, kinds  # the one in flight (serial run)
    assert kinds[Failure.NOT_SENT] >= 12, kinds  # at least the whole second pass
    assert sum(r["ok"] for r in records) >= 1
    assert all("deadline" in r["error"] for r in records if not r["ok"])
    saved = read_results(out / "results.json")
    assert saved["stopped"] == results["stopped"] and not saved["interrupted"]
    assert [p["failed"] for p in saved["passes"]] == [
        sum(not r["ok"] for r in records if r["pass"] == i) for i in (0, 1)]


def test_resume_sends_only_what_is_missing_with_the_same_salts(slow_server, workload,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(slow_server, workload, out, deadline_s=0.55)
    secret_file = out / SECRET_FILE
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    before = read_records(out / "records.jsonl")
    kept = [r for r in before if r["ok"]]

    resume = load_resume(out, deadline_s=None)
    results = _run(slow_server, workload, out, resume=resume)

    after = read_records(out / "records.jsonl")
    keys = Counter((r["pass"], r["phase"], r["request_id"]) for r in after)
    assert max(keys.values()) == 1, "a request was recorded twice"
    measured = [r for r in after if r["phase"] == "measure"]
    assert len(measured) == 24 and all(r["ok"] for r in measured)
    assert [r for r in after if r["segment"] == 0] == kept, "finished records are kept as they were"
    assert len({r["seq"] for r in after}) == len(after)
    first_new = min(r["start_s"] for r in after if r["segment"] == 1)
    assert first_new > max(r["end_s"] for r in kept), "the clock goes on after the last record"
    # The same secret gives each tenant the same salt in both segments.
    secret = read_secret(out)
    refs = {r["id"]: r["salt_ref"] for r in workload.requests()}
    for r in after:
        salted = r["salt_mode"] != "none"
        assert r["salt_digest"] == (digest(derive(secret, refs[r["request_id"]])) if salted else None)
    assert not results["interrupted"] and results["stopped"] is None
    (entry,) = results["metadata"]["resumed"]
    assert entry["segment"] == 1 and entry["records_kept"] == len(kept)
    assert entry["records_resent"] == len(before) - len(kept)
    (resumed_pass,) = [p for p in results["passes"] if p["counters_error"]]
    assert "resumed in the middle" in resumed_pass["counters_error"]
    with pytest.raises(BenchError, match="the run finished"):
        load_resume(out, deadline_s=None)


def test_resume_refuses_a_secret_others_can_read(slow_server, workload, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(slow_server, workload, out, deadline_s=0.3)
    os.chmod(out / SECRET_FILE, 0o644)
    with pytest.raises(BenchError, match=r"\.salt-secret: readable by others"):
        load_resume(out, deadline_s=None)
    (out / SECRET_FILE).unlink()
    with pytest.raises(BenchError, match=r"\.salt-secret: cannot read"):
        load_resume(out, deadline_s=None)
