"""The peer drivers: their command lines and datasets, the parsing of each tool's real output
(``tests/fixtures/peers``), the measured subprocess, and one end-to-end run per tool against
the zero-work server where its environment is provisioned (tests never provision one)."""

from __future__ import annotations

import base64
import json
import shutil
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from bench.errors import BenchError
from bench.peers import DRIVERS
from bench.peers.aiperf import AIPerf
from bench.peers.base import (
    OFFLINE_ENV,
    Driver,
    PeerRun,
    Prompt,
    ToolMetrics,
    make_prompts,
    run_measured,
    write_tokenizer,
)
from bench.peers.guidellm import GuideLLM
from bench.peers.inference_perf import InferencePerf
from bench.peers.provision import PEERS, find_python
from bench.peers.vllm_bench import VllmBench
from bench.zerowork import ZeroWorkServer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "peers"
URL = "http://127.0.0.1:8000"
TEXT = (Prompt("alpha beta"), Prompt("gamma delta"))
IMAGE = (Prompt("alpha beta", "data:image/png;base64,AAAA"),)


def _run(prompts: tuple[Prompt, ...] = TEXT, **kw) -> PeerRun:
    return PeerRun(URL, "zerowork", prompts, **{"output_tokens": 16, "concurrency": 4,
                                                "requests": 5, **kw})


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# --- shared pieces -------------------------------------------------------------------------

def test_prompts_are_distinct_and_images_are_png_data_urls() -> None:
    prompts = make_prompts(3, images=True, words=10)
    assert len({p.text for p in prompts}) == 3
    assert all(len(p.text.split()) == 10 for p in prompts)
    head, data = prompts[0].image_url.split(",", 1)
    assert head == "data:image/png;base64"
    assert base64.b64decode(data).startswith(b"\x89PNG")
    assert make_prompts(1)[0].image_url is None


def test_prompt_content_and_cycling() -> None:
    assert TEXT[0].content() == "alpha beta"
    assert IMAGE[0].content() == [{"type": "text", "text": "alpha beta"},
                                  {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    assert [p.text for p in _run().cycled()] == ["alpha beta", "gamma delta"] * 2 + ["alpha beta"]
    assert _run(IMAGE).images and not _run().images


def test_word_tokenizer_files(tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "tok", ["b a", "a c"])
    model = json.loads((d / "tokenizer.json").read_text())["model"]
    assert model["type"] == "WordLevel"
    assert model["vocab"] == {"[UNK]": 0, "a": 1, "b": 2, "c": 3}
    assert json.loads((d / "tokenizer_config.json").read_text())["tokenizer_class"]


def test_only_aiperf_runs_online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "HF_HUB_OFFLINE" not in AIPerf(["aiperf"], "0").env()
    assert OFFLINE_ENV.items() <= GuideLLM(["guidellm"], "0").env().items()


def test_find_python_prefers_this_interpreter() -> None:
    assert find_python((3, 0)) == sys.executable
    with pytest.raises(BenchError, match="no Python >= 3.99"):
        find_python((3, 99))


def test_every_peer_is_pinned() -> None:
    assert set(PEERS) | {"vllm-bench"} == set(DRIVERS)
    assert all("==" in r for spec in PEERS.values() for r in spec.requirements)


def test_run_measured_counts_the_whole_tree_and_kills_leftovers(tmp_path: Path) -> None:
    """A child burns CPU and holds 64 MiB; a grandchild outlives the tool and is killed."""
    child = ("import time; b = bytearray(64 << 20); t = time.process_time()\n"
             "while time.process_time() - t < 0.6: pass\ntime.sleep(0.6)")
    script = (f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child!r}])\n"
              "p = subprocess.Popen(['sleep', '60']); open('pid', 'w').write(str(p.pid))")
    usage = run_measured([sys.executable, "-c", script], cwd=tmp_path, log=tmp_path / "log",
                         env={}, timeout_s=60)
    assert usage.returncode == 0
    assert usage.cpu_s >= 0.6
    assert usage.peak_rss_mb >= 64
    try:  # killed: gone, or a zombie until its new parent reaps it
        assert psutil.Process(int((tmp_path / "pid").read_text())).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        pass


def test_run_measured_times_out(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="did not finish"):
        run_measured(["sleep", "30"], cwd=tmp_path, log=tmp_path / "log", env={}, timeout_s=0.5)


class _Silent(Driver):
    name = "silent"

    def command(self, run: PeerRun, workdir: Path, tokenizer: Path) -> list[str]:
        return ["true"]

    def parse(self, workdir: Path) -> ToolMetrics:
        return AIPerf.parse(self, workdir)  # type: ignore[arg-type]


def test_a_tool_that_writes_nothing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="silent .exit 0. left no readable result"):
        _Silent(["true"], "0").run(_run(), tmp_path / "w")


def test_a_used_workdir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("{}")
    with pytest.raises(BenchError, match="not empty"):
        _Silent(["true"], "0").run(_run(), tmp_path)


# --- command lines and datasets --------------------------------------------------------------

def test_vllm_bench_command(tmp_path: Path) -> None:
    drv = VllmBench(["py", "-m", "vllm.entrypoints.cli.main", "bench", "serve"], "0.32.0")
    argv = drv.command(_run(IMAGE), tmp_path, tmp_path / "tok")
    assert argv[:5] == drv.prefix
    assert _flag(argv, "--backend") == "openai-chat"
    assert _flag(argv, "--base-url") == URL
    assert _flag(argv, "--dataset-name") == "custom_image"
    assert _flag(argv, "--max-concurrency") == "4"
    assert _flag(argv, "--num-prompts") == "5"
    assert _flag(argv, "--request-rate") == "inf"
    assert _flag(argv, "--custom-output-len") == "16"
    assert json.loads(_flag(argv, "--extra-body")) == {"min_tokens": 16}
    assert "--ignore-eos" in argv
    rows = _rows(Path(_flag(argv, "--dataset-path")))
    assert len(rows) == 5
    assert rows[0] == {"content": IMAGE[0].content()}
    argv = drv.command(_run(rate=50.0), tmp_path, tmp_path / "tok")
    assert _flag(argv, "--request-rate") == "50.0"
    assert _rows(tmp_path / "prompts.jsonl")[1] == {"content": [{"type": "text", "text": "gamma delta"}]}


def test_aiperf_command(tmp_path: Path) -> None:
    argv = AIPerf(["aiperf", "profile"], "0.13.0").command(_run(IMAGE), tmp_path, tmp_path / "tok")
    assert argv[:2] == ["aiperf", "profile"]
    assert _flag(argv, "--url") == URL
    assert _flag(argv, "--custom-dataset-type") == "single_turn"
    assert _flag(argv, "--concurrency") == "4"
    assert _flag(argv, "--request-count") == "5"
    assert json.loads(_flag(argv, "--extra-inputs")) == {"ignore_eos": True, "min_tokens": 16}
    assert "--streaming" in argv and "--request-rate" not in argv
    assert _rows(Path(_flag(argv, "--input-file")))[0] == {
        "text": "alpha beta", "output_length": 16, "image": "data:image/png;base64,AAAA"}
    argv = AIPerf(["aiperf", "profile"], "0.13.0").command(_run(rate=50.0), tmp_path, tmp_path)
    assert _flag(argv, "--request-rate") == "50.0"
    assert _flag(argv, "--arrival-pattern") == "poisson"
    assert "image" not in _rows(tmp_path / "prompts.jsonl")[0]


def test_guidellm_command(tmp_path: Path) -> None:
    argv = GuideLLM(["guidellm", "run"], "0.8.1").command(_run(IMAGE), tmp_path, tmp_path / "tok")
    assert _flag(argv, "--backend") == (f"kind=openai_http,target={URL},model=zerowork,"
                                        "extras.body.min_tokens=16")
    assert _flag(argv, "--profile") == "kind=concurrent,streams=4"
    assert _flag(argv, "--constraint") == "kind=max_requests,count=5"
    assert _flag(argv, "--tokenizer") == f"kind=huggingface_auto,model={tmp_path / 'tok'}"
    assert _rows(tmp_path / "prompts.jsonl")[0] == {
        "prompt": "alpha beta", "output_tokens_count": 16,
        "image": {"type": "image_url", "image": "data:image/png;base64,AAAA"}}
    argv = GuideLLM(["guidellm", "run"], "0.8.1").command(_run(rate=50.0), tmp_path, tmp_path)
    assert _flag(argv, "--profile") == "kind=poisson,rate=50.0,max_concurrency=4"


def test_inference_perf_command(tmp_path: Path) -> None:
    drv = InferencePerf(["inference-perf"], "0.7.0")
    argv = drv.command(_run(IMAGE), tmp_path, tmp_path / "tok")
    assert _flag(argv, "--server.base_url") == URL
    assert _flag(argv, "--api.type") == "chat"
    assert _flag(argv, "--data.type") == "shareGPT"
    assert _flag(argv, "--load.type") == "concurrent"
    assert json.loads(_flag(argv, "--load.stages")) == [{"num_requests": 5, "concurrency_level": 4}]
    assert _rows(Path(_flag(argv, "--data.path")))[0] == {"conversations": [
        {"from": "human", "value": IMAGE[0].content()}, {"from": "gpt", "value": ""}]}
    argv = drv.command(_run(rate=2.0), tmp_path, tmp_path)
    assert _flag(argv, "--load.type") == "poisson"
    assert json.loads(_flag(argv, "--load.stages")) == [{"rate": 2.0, "duration": 3}]


# --- parsing each tool's real output ---------------------------------------------------------

def _place(tmp_path: Path, fixture: str, where: str) -> dict:
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / fixture, tmp_path / where)
    return json.loads((FIXTURES / fixture).read_text())


def test_parse_vllm_bench(tmp_path: Path) -> None:
    raw = _place(tmp_path, "vllm-bench.json", "vllm-bench.json")
    m = VllmBench(["x"], "0").parse(tmp_path)
    assert (m.completed, m.failed) == (200, 0)
    assert m.duration_s == raw["duration"] and m.request_throughput == raw["request_throughput"]
    assert (m.ttft_p50_ms, m.ttft_p99_ms) == (raw["p50_ttft_ms"], raw["p99_ttft_ms"])
    assert (m.itl_p50_ms, m.itl_p99_ms) == (raw["p50_itl_ms"], raw["p99_itl_ms"])


def test_parse_aiperf(tmp_path: Path) -> None:
    raw = _place(tmp_path, "profile_export_aiperf.json", "aiperf-artifacts/profile_export_aiperf.json")
    m = AIPerf(["x"], "0").parse(tmp_path)
    assert (m.completed, m.failed) == (200, 0)
    assert m.duration_s == raw["benchmark_duration"]["avg"]
    assert m.request_throughput == raw["request_throughput"]["avg"]
    assert (m.ttft_p50_ms, m.ttft_p99_ms) == (raw["time_to_first_token"]["p50"],
                                              raw["time_to_first_token"]["p99"])
    assert m.itl_p50_ms == raw["inter_token_latency"]["p50"]
    raw["error_request_count"] = {"unit": "requests", "avg": 3.0}
    (tmp_path / "aiperf-artifacts/profile_export_aiperf.json").write_text(json.dumps(raw))
    assert AIPerf(["x"], "0").parse(tmp_path).failed == 3


def test_parse_guidellm(tmp_path: Path) -> None:
    raw = _place(tmp_path, "guidellm.json", "guidellm.json")["benchmarks"][0]
    m = GuideLLM(["x"], "0").parse(tmp_path)
    assert (m.completed, m.failed) == (200, 0)
    assert m.duration_s == raw["duration"]
    assert m.request_throughput == raw["metrics"]["requests_per_second"]["successful"]["mean"]
    ttft = raw["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"]
    itl = raw["metrics"]["inter_token_latency_ms"]["successful"]["percentiles"]
    assert (m.ttft_p50_ms, m.ttft_p99_ms, m.itl_p50_ms, m.itl_p99_ms) == (
        ttft["p50"], ttft["p99"], itl["p50"], itl["p99"])


def test_parse_inference_perf(tmp_path: Path) -> None:
    raw = _place(tmp_path, "summary_lifecycle_metrics.json",
                 "inference-perf-reports/summary_lifecycle_metrics.json")
    m = InferencePerf(["x"], "0").parse(tmp_path)
    assert (m.completed, m.failed) == (200, 0)
    assert m.duration_s == raw["benchmark_time_seconds"]
    assert m.request_throughput == raw["successes"]["throughput"]["requests_per_sec"]
    ttft = raw["successes"]["latency"]["time_to_first_token"]
    assert m.ttft_p50_ms == pytest.approx(ttft["median"] * 1e3)
    assert m.itl_p99_ms == pytest.approx(raw["successes"]["latency"]["inter_token_latency"]["p99"] * 1e3)


# --- end to end --------------------------------------------------------------------------------

def _finished_requests(url: str) -> float:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total{"))


#: vllm bench serve runs end to end in tests/clientbench/test_clientbench_engine.py (an engine
#: test: the engine environment is provisioned by then); the other peers where installed.
@pytest.mark.parametrize("name", sorted(set(DRIVERS) - {VllmBench.name}))
def test_end_to_end_against_zero_work(name: str, tmp_path: Path) -> None:
    """20 image requests at concurrency 4, all of which the server answered."""
    driver = DRIVERS[name].find()
    if driver is None:
        pytest.skip(f"{name}: environment not provisioned")
    with ZeroWorkServer(output_tokens=16) as server:
        run = PeerRun(server.url, "zerowork", make_prompts(5, images=True), concurrency=4,
                      requests=20, timeout_s=300)
        result = driver.run(run, tmp_path / "work")
        assert _finished_requests(server.url) >= 20
    m = result.metrics
    assert (m.completed, m.failed) == (20, 0)
    assert m.duration_s > 0 and m.request_throughput > 0
    assert 0 < m.ttft_p50_ms <= m.ttft_p99_ms
    assert result.cpu_s > 0 and result.peak_rss_mb > 10
    assert result.to_json()["metrics"]["completed"] == 20
