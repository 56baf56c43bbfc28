"""Real architectures without weights, built in the real engine environment: the published
config copied as is, the exact Qwen vocabulary, the parameter count of the architecture."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.engine.model import build_model
from bench.engine.provision import provision
from bench.engine.reference import REFERENCES
from bench.engine.spec import default_engine_spec


def _in_engine(python: Path, script: str, model: Path) -> dict:
    """What ``script`` prints last as JSON, run by the engine's ``python`` on ``model``."""
    proc = subprocess.run([str(python), "-c", script, str(model)], capture_output=True,
                          text=True, check=True, timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_qwen25_vl_7b_has_the_published_config_vocabulary_and_size() -> None:
    env = provision(default_engine_spec())
    model = build_model(env, "qwen2.5-vl-7b")
    assert json.loads((model.path / "config.json").read_text()) == \
        REFERENCES["qwen2.5-vl-7b"]["config"]
    # the model card's size (8.29B parameters), counted on the meta device
    assert round(model.built["parameters"] / 1e9, 2) == 8.29
    meta = model.metadata()
    assert meta["architecture"] == "Qwen2_5_VLForConditionalGeneration"
    assert meta["modalities"] == ["image", "video"]
    # Qwen2's own ids for these strings (its tokenizer.json), the chat tokens included
    script = (
        "import json, sys\n"
        "from transformers import AutoProcessor\n"
        "p = AutoProcessor.from_pretrained(sys.argv[1]); t = p.tokenizer\n"
        "texts = ['You are a helpful assistant.', 'Hello world', '<|im_start|>user\\n']\n"
        "msg = [{'role': 'user', 'content': [{'type': 'image'}, {'type': 'text', 'text': 'hi'}]}]\n"
        "print(json.dumps({'ids': [t.encode(x, add_special_tokens=False) for x in texts],\n"
        "  'size': len(t), 'chat': p.apply_chat_template(msg, add_generation_prompt=True,\n"
        "                                                tokenize=False)}))\n")
    out = _in_engine(env.python, script, model.path)
    assert out["ids"] == [[2610, 525, 264, 10950, 17847, 13], [9707, 1879], [151644, 872, 198]]
    assert out["size"] == 151665
    assert out["chat"] == ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>hi"
                           "<|im_end|>\n<|im_start|>assistant\n")


def test_qwen25_omni_7b_thinker_takes_its_token_ids_from_transformers() -> None:
    env = provision(default_engine_spec())
    model = build_model(env, "qwen2.5-omni-7b")
    thinker = json.loads((model.path / "config.json").read_text())["thinker_config"]
    script = (
        "import json, sys\n"
        "from transformers import AutoProcessor, Qwen2_5OmniThinkerConfig\n"
        "c = Qwen2_5OmniThinkerConfig()\n"
        "keys = ['audio_token_index', 'image_token_index', 'video_token_index',\n"
        "        'audio_start_token_id', 'audio_end_token_id', 'user_token_id']\n"
        "p = AutoProcessor.from_pretrained(sys.argv[1])\n"
        "msg = [{'role': 'user', 'content': [{'type': 'audio'}, {'type': 'text', 'text': 'hi'}]}]\n"
        "print(json.dumps({'defaults': {k: getattr(c, k) for k in keys},\n"
        "  'processor': type(p).__name__, 'chat': p.apply_chat_template(msg, tokenize=False)}))\n")
    out = _in_engine(env.python, script, model.path)
    assert {k: thinker[k] for k in out["defaults"]} == out["defaults"]
    assert out["processor"] == "Qwen2_5OmniProcessor"
    assert out["chat"] == "<|im_start|>user\n<|audio_bos|><|AUDIO|><|audio_eos|>hi<|im_end|>\n"
    # the thinker alone (the published 10.7B also counts the talker and token2wav)
    assert 8.9e9 < model.built["parameters"] < 9.0e9
    assert model.metadata()["modalities"] == ["image", "audio", "video"]
