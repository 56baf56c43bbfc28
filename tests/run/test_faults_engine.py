"""Faults on the real engine: the server killed mid-run, saltbench killed outright, and a
run resumed twice to completion on new servers, with an API key; afterwards no output file
holds the key, the run secret or a raw salt.

One scenario (three server starts, one at a time), checked by several tests.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import psutil
import pytest
from cliproc import saltbench_process

from bench.cachedirs import cache_dir
from bench.measured.records import read_records
from bench.results import read_results
from bench.run.secret import SECRET_FILE, read_secret
from bench.salts import derive
from bench.vocab import Failure
from bench.workload import open_workload

API_KEY = "sk-saltbench-test-6f1d2a9c"
REQUESTS = 40
PATHS = "chat,generate-tokens"
PASSES = 4  # two paths x two salt modes


def _wait(predicate, timeout_s: float, what: str, proc) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert proc.poll() is None, f"saltbench exited early while waiting for {what}: " \
                                    f"{proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _measured(out: Path, segment: int) -> int:
    path = out / "records.jsonl"
    if not path.exists():
        return 0
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]
    return sum(r["phase"] == "measure" and r.get("segment") == segment for r in lines)


def _server(proc) -> psutil.Process:
    """The vLLM server saltbench started (its own process group leader)."""
    for child in psutil.Process(proc.pid).children():
        if "serve" in child.cmdline():
            return child
    raise AssertionError("no vLLM server among saltbench's children")


def _status(url: str, body: dict, key: str | None) -> int:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _group_gone(pgid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = [p for p in psutil.process_iter(["status"])
                 if _pgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE]
        if not alive:
            return True
        time.sleep(0.5)
    return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("faults") / "run"
    started = time.time()
    seen: dict = {"out": out, "stderr": []}
    # 1. The server is killed (SIGKILL, its whole group) during the first measured pass.
    # (Requests in flight together, or after the restart, cannot all be judged exactly:
    # allowed, the subject here is the faults.)
    with saltbench_process("run", "--spec", "mixed-tenants", "--requests", str(REQUESTS),
                           "--paths", PATHS, "--max-concurrency", "4", "--allow-unjudged",
                           "--out", str(out),
                           "--api-key", API_KEY) as proc:
        _wait(lambda: _measured(out, 0) >= 8, 600, "8 measured records", proc)
        server = _server(proc)
        port = server.cmdline()[server.cmdline().index("--port") + 1]
        base = f"http://127.0.0.1:{port}"
        chat = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        seen["chat_without_key"] = _status(f"{base}/v1/chat/completions", chat, None)
        seen["generate_without_key"] = _status(f"{base}/inference/v1/generate",
                                               {"token_ids": [1, 2, 3]}, None)
        killed = time.monotonic()
        os.killpg(server.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=300)
        seen["stop_s"] = time.monotonic() - killed
        seen["first_exit"], seen["first_results"] = proc.returncode, read_results(
            out / "results.json")
        seen["first_records"] = read_records(out / "records.jsonl")
        seen["stderr"].append(stderr)
    # 2. Resumed (key from the environment); saltbench itself is killed outright mid-way.
    with saltbench_process("run", "--resume", str(out), env={"VLLM_API_KEY": API_KEY}) as proc:
        _wait(lambda: _measured(out, 1) >= 4, 600, "4 records of the resumed run", proc)
        server = _server(proc)
        proc.kill()
        proc.wait(timeout=30)
        seen["server_gone_after_sigkill"] = _group_gone(server.pid, 60)
        seen["stderr"].append(proc.communicate()[1])
    # 3. Resumed again, to the end.
    with saltbench_process("run", "--resume", str(out), "--api-key", API_KEY) as proc:
        _, stderr = proc.communicate(timeout=900)
        seen["last_exit"] = proc.returncode
        seen["stderr"].append(stderr)
    seen["logs"] = [p for p in cache_dir("logs").glob("server-*.log")
                    if p.stat().st_mtime >= started]
    print(f"server killed -> saltbench exited in {seen['stop_s']:.1f} s; "
          f"without the key: chat HTTP {seen['chat_without_key']}, "
          f"generate HTTP {seen['generate_without_key']}")
    return seen


def test_a_killed_server_ends_the_run_promptly_with_every_request_accounted(scenario) -> None:
    assert scenario["first_exit"] == 3, scenario["stderr"][0]
    assert scenario["stop_s"] < 60
    assert "stopped answering" in scenario["stderr"][0]
    assert f"--resume {scenario['out']}" in scenario["stderr"][0].replace("\n", "")
    results = scenario["first_results"]
    assert "the server stopped answering" in results["stopped"]
    measured = [r for r in scenario["first_records"] if r["phase"] == "measure"]
    assert len(measured) == REQUESTS * PASSES
    failures = Counter(r["failure"] for r in measured if not r["ok"])
    assert failures[Failure.NOT_SENT] >= REQUESTS * (PASSES - 1), failures
    assert set(failures) <= {Failure.NOT_SENT, Failure.CONNECT, Failure.RESET}, failures
    assert sum(p["failed"] for p in results["passes"]) == sum(failures.values())


def test_the_api_key_is_sent_and_the_server_needs_it(scenario) -> None:
    assert scenario["chat_without_key"] == 401
    ok = [r for r in scenario["first_records"] if r["ok"]]
    assert ok and {r["path"] for r in ok} == {"chat"}  # the key got the first pass through


def test_the_server_dies_with_a_killed_saltbench(scenario) -> None:
    assert scenario["server_gone_after_sigkill"]


def test_a_resumed_run_completes_without_repeating_a_request(scenario) -> None:
    assert scenario["last_exit"] == 0, scenario["stderr"][-1]
    out = scenario["out"]
    records = read_records(out / "records.jsonl")
    keys = Counter((r["pass"], r["phase"], r["request_id"]) for r in records)
    assert max(keys.values()) == 1
    measured = [r for r in records if r["phase"] == "measure"]
    assert len(measured) == REQUESTS * PASSES and all(r["ok"] for r in measured)
    kept = [r for r in scenario["first_records"] if r["ok"]]
    assert [r for r in records if r["segment"] == 0] == kept
    results = read_results(out / "results.json")
    assert [e["segment"] for e in results["metadata"]["resumed"]] == [1, 2]
    assert not results["interrupted"] and results["stopped"] is None
    assert results["judgements"]["counts"]["leak"] == 0


def test_no_output_holds_the_key_the_secret_or_a_raw_salt(scenario) -> None:
    out = scenario["out"]
    secret = read_secret(out)
    results = read_results(out / "results.json")
    workload = open_workload(results["metadata"]["workload"]["dir"])
    refs = {r["salt_ref"] for r in workload.requests() if r["salt_ref"]}
    assert refs
    needles = {API_KEY: "API key", secret: "run secret",
               **{derive(secret, ref): f"raw salt of {ref}" for ref in refs}}
    files = [p for p in out.rglob("*") if p.is_file() and p.name != SECRET_FILE]
    files += scenario["logs"]
    assert len(files) >= 4 and scenario["logs"]
    found = [(str(p), what) for p in files for needle, what in needles.items()
             if needle in p.read_text(errors="replace")]
    found += [("stderr", what) for text in scenario["stderr"] for needle, what in needles.items()
              if needle in text]
    assert not found
