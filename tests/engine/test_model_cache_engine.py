"""The local model cache, with the real engine environment: files checked by sha256,
a damaged model rebuilt, concurrent builders (real processes) serialised by the lock."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from cliproc import saltbench_process

from bench.engine.environment import EngineEnv
from bench.engine.model import FILES_MANIFEST, build_model, damage
from bench.engine.provision import provision
from bench.engine.spec import default_engine_spec


@pytest.fixture
def env(tmp_path: Path, monkeypatch) -> EngineEnv:
    """The engine from the shared cache; models go to a cache of this test's own."""
    engine = provision(default_engine_spec())
    monkeypatch.setenv("SALTBENCH_CACHE", str(tmp_path / "cache"))
    return engine


def test_damaged_model_is_rebuilt(env: EngineEnv, caplog) -> None:
    model = build_model(env, "tiny")
    files = json.loads((model.path / FILES_MANIFEST).read_text())["files"]
    assert {"config.json", "tokenizer.json", "processor_config.json"} <= set(files)
    tokenizer, config = model.path / "tokenizer.json", model.path / "config.json"
    original = {p: p.read_bytes() for p in (tokenizer, config)}
    stamp = (model.path / FILES_MANIFEST).stat().st_mtime_ns
    assert build_model(env, "tiny") == model  # intact: reused
    assert (model.path / FILES_MANIFEST).stat().st_mtime_ns == stamp

    damages = (
        (tokenizer, lambda p: p.write_bytes(original[p][: len(original[p]) // 2]), "bytes"),
        (config, lambda p: p.write_bytes(original[p].replace(b"128", b"256", 1)),
         "sha256 differs"),
    )
    for path, harm, problem in damages:
        harm(path)
        assert problem in damage(model.path)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="bench.engine.model"):
            assert build_model(env, "tiny") == model
        assert f"{path}: " in caplog.text and problem in caplog.text
        assert path.read_bytes() == original[path] and damage(model.path) is None
    assert sorted(p.name for p in model.path.parent.iterdir()) == [model.path.name,
                                                                   f"{model.path.name}.lock"]


def test_concurrent_builders_share_one_model(env: EngineEnv) -> None:
    args = ("model", "tiny", "--engine-python", str(env.python))
    with saltbench_process(*args) as first, saltbench_process(*args) as second:
        outputs = [p.communicate(timeout=600) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    paths = {json.loads(stdout)["path"] for stdout, _ in outputs}
    assert len(paths) == 1
    path = Path(paths.pop())
    assert damage(path) is None
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, f"{path.name}.lock"]
