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
