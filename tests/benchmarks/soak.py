"""Soak (issue 15): many requests at high concurrency against the zero-work server, through
saltbench's CLI, with the client's memory sampled every second.

Not collected by pytest (no ``test_`` prefix). Run from the repository root::

    .venv/bin/python tests/benchmarks/soak.py [--requests 10000] [--concurrency 128]
        [--spec image] [--out DIR]

The workload is generated (or reused) before the timed run. Writes ``samples.csv`` (per
second: the run process's RSS and CPU time, the server's CPU time) and ``soak.json`` to
``--out`` and prints: requests sent (counted by the server), recorded, failed, the measured
pass's duration and throughput, the run process's RSS at start, peak and end, and per
second its RSS and both processes' CPU use (1.0 = one core).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import psutil

from bench.measured.records import read_records
from bench.results import read_results
from bench.workload import generate
from bench.zerowork import ZeroWorkServer

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


@dataclass
class Sample:
    seconds: float
    rss_mib: float  # the run process
    client_cpu_s: float  # the run process, cumulative
    server_cpu_s: float  # the zero-work server, cumulative


def _sample(client: psutil.Popen, server: psutil.Process, interval_s: float) -> list[Sample]:
    """Both processes every ``interval_s`` until the client exits."""
    samples, started = [], time.monotonic()
    while client.poll() is None:
        time.sleep(interval_s)  # first sample after a second: not the bare interpreter
        try:
            rss, cpu = client.memory_info().rss, client.cpu_times()
        except psutil.NoSuchProcess:
            break
        if rss:  # 0 once it is a zombie
            samples.append(Sample(time.monotonic() - started, rss / MIB, cpu.user + cpu.system,
                                  sum(server.cpu_times()[:2])))
    return samples


def soak(requests: int, concurrency: int, spec: str, out: Path) -> dict:
    generate(spec, requests=requests)  # the run reuses it: generation stays out of the figures
    run_dir = out / "run"
    with ZeroWorkServer() as server, open(out / "run.log", "w") as log:
        command = [sys.executable, str(ROOT / "run_bench.py"), "run", "--server-url", server.url,
                   "--spec", spec, "--requests", str(requests),
                   "--max-concurrency", str(concurrency), "--paths", "chat",
                   "--salt-modes", "salted", "--warmup", "0", "--allow-unjudged",
                   "--out", str(run_dir)]
        started = time.monotonic()
        proc = psutil.Popen(command, stdout=log, stderr=log)
        try:
            samples = _sample(proc, psutil.Process(server.proc.pid), 1.0)
        finally:
            if proc.poll() is None:  # interrupted: leave no run behind
                proc.kill()
            proc.wait()
        wall_s = time.monotonic() - started
    (out / "samples.csv").write_text(",".join(f.name for f in fields(Sample)) + "\n" + "".join(
        ",".join(f"{v:.2f}" for v in astuple(x)) + "\n" for x in samples))
    records = read_records(run_dir / "records.jsonl")
    (measured,) = read_results(run_dir / "results.json")["passes"]
    rss = [x.rss_mib for x in samples]
    return {
        "command": " ".join(command), "exit_code": proc.returncode,
        "requests": requests, "concurrency": concurrency, "spec": spec,
        "sent_server_count": measured["counters"].get("vllm:request_success_total"),
        "recorded": len(records), "failed": sum(not r["ok"] for r in records),
        "counters_agree": measured["counters_agree"],
        "pass_duration_s": round(measured["duration_s"], 2),
        "requests_per_s": round(len(records) / measured["duration_s"], 1),
        "wall_s": round(wall_s, 1),
        "rss_mib": {"start": round(rss[0], 1), "peak": round(max(rss), 1),
                    "end": round(rss[-1], 1)} if rss else None,
        # Per second: RSS MiB, and CPU share of one core of the client and of the server.
        "over_time": [[round(b.seconds), round(b.rss_mib, 1),
                       round((b.client_cpu_s - a.client_cpu_s) / (b.seconds - a.seconds), 2),
                       round((b.server_cpu_s - a.server_cpu_s) / (b.seconds - a.seconds), 2)]
                      for a, b in zip(samples, samples[1:])],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--spec", default="image", help="workload spec (default: image)")
    parser.add_argument("--out", type=Path, help="output directory (default: a new temporary one)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="saltbench-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    figures = soak(args.requests, args.concurrency, args.spec, out)
    (out / "soak.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps({k: v for k, v in figures.items() if k != "over_time"}, indent=1))
    print("second  RSS MiB  client CPU  server CPU")
    for row in figures["over_time"]:
        print("{:6d} {:8.1f} {:11.2f} {:11.2f}".format(*row))
    print(f"outputs: {out}")
    ok = (figures["exit_code"] == 0 and figures["failed"] == 0
          and figures["recorded"] == figures["sent_server_count"] == args.requests)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
