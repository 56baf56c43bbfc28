"""The local model builder, run in the real engine environment: deterministic files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.engine.model import PRESETS
from bench.engine.provision import provision, script
from bench.engine.spec import default_engine_spec


def build(python: Path, preset: str, out: Path) -> dict:
    spec = out.with_suffix(".json")
    spec.write_text(json.dumps(PRESETS[preset]))
    proc = subprocess.run([str(python), str(script("build_omni.py")), str(spec), str(out)],
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_same_preset_gives_the_same_files(preset: str, tmp_path: Path) -> None:
    env = provision(default_engine_spec())
    first = build(env.python, preset, tmp_path / "a")
    build(env.python, preset, tmp_path / "b")
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
            "processor_config.json", "generation_config.json"} <= set(files)
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["architectures"] == ["Qwen2_5OmniModel"]
    assert config["enable_audio_output"] is False
    thinker = config["thinker_config"]
    ids = first["special_token_ids"]
    assert thinker["image_token_index"] == ids["<|IMAGE|>"]
    assert thinker["audio_token_index"] == ids["<|AUDIO|>"]
    assert thinker["video_token_index"] == ids["<|VIDEO|>"]
    assert thinker["text_config"]["hidden_size"] == PRESETS[preset]["text"]["hidden_size"]
