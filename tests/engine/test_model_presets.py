"""Model presets respect the CPU engine's limits (no engine needed)."""

from __future__ import annotations

import pytest

from bench.engine.model import PRESETS, model_key
from bench.errors import BenchError


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_shapes_fit_cpu_attention(name: str) -> None:
    p = PRESETS[name]
    text, vision = p["text"], p["vision"]
    head_dim = text["hidden_size"] // text["num_attention_heads"]
    assert head_dim >= 32, "CPU attention needs head_dim >= 32"
    assert sum(p["mrope_section"]) == head_dim // 2
    assert text["num_attention_heads"] % text["num_key_value_heads"] == 0
    assert vision["hidden_size"] // vision["num_heads"] >= 32
    assert max(vision["fullatt_block_indexes"]) < vision["depth"]


def test_model_key_depends_on_preset_and_transformers() -> None:
    assert model_key("tiny", "5.19.0") == model_key("tiny", "5.19.0")
    assert model_key("tiny", "5.19.0") != model_key("medium", "5.19.0")
    assert model_key("tiny", "5.19.0") != model_key("tiny", "5.20.0")


def test_unknown_preset_is_named() -> None:
    from bench.engine.model import build_model

    with pytest.raises(BenchError, match="model preset 'huge': unknown"):
        build_model(None, "huge")  # type: ignore[arg-type]


def test_demo_preset_follows_the_cpu(tmp_path, monkeypatch):
    """The medium model only where vLLM's fast CPU path (AVX-512) serves it; a real
    architecture on a GPU."""
    from bench.engine import model

    monkeypatch.setattr(model, "has_cuda_gpu", lambda: False)
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n")
    assert model.demo_preset(info) == "tiny"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 avx512f avx512bw\n")
    assert model.demo_preset(info) == "medium"
    assert model.demo_preset(tmp_path / "missing") == "tiny"
    monkeypatch.setattr(model, "has_cuda_gpu", lambda: True)
    assert model.demo_preset(info.with_name("missing")) == "qwen2.5-omni-7b"
