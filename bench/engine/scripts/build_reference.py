"""Build a real architecture's model directory without weights, offline.

Runs inside the ENGINE environment (it needs transformers, tokenizers and tiktoken):
    python build_reference.py PRESET_JSON OUT_DIR
PRESET_JSON holds the ``config`` (written as is), the image and video ``processor`` settings, the
``special_tokens`` in id order after the BPE ranks, and ``bpe``: Qwen's BPE ranks file
(``qwen.tiktoken``, the vocabulary Qwen2 and Qwen2.5 reuse). The server loads the directory
with ``--load-format dummy``. Prints a JSON summary (parameters counted on the meta device).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from tokenizers import AddedToken, normalizers
from transformers import (
    AutoConfig,
    AutoModelForImageTextToText,
    PreTrainedTokenizerFast,
    Qwen2_5_VLProcessor,
    Qwen2_5OmniProcessor,
    Qwen2_5OmniThinkerForConditionalGeneration,
    Qwen2VLImageProcessor,
    WhisperFeatureExtractor,
)
from transformers.convert_slow_tokenizer import TikTokenConverter
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

#: Qwen2's pre-tokenizer split (digits one at a time, unlike tiktoken's cl100k).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

#: Per model type: the chat tags of a media part, the token each config key names, where
#: the token ids are (the thinker's config for Qwen2.5-Omni) and the tokenizer's named tokens.
FAMILIES = {
    "qwen2_5_vl": {
        "tags": {"image": "<|vision_start|><|image_pad|><|vision_end|>",
                 "video": "<|vision_start|><|video_pad|><|vision_end|>"},
        "ids": {"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>",
                "vision_start_token_id": "<|vision_start|>",
                "vision_end_token_id": "<|vision_end|>", "vision_token_id": "<|vision_pad|>",
                "bos_token_id": "<|endoftext|>", "eos_token_id": "<|im_end|>"},
        "named": {},
    },
    "qwen2_5_omni": {
        "tags": {"image": "<|vision_bos|><|IMAGE|><|vision_eos|>",
                 "video": "<|vision_bos|><|VIDEO|><|vision_eos|>",
                 "audio": "<|audio_bos|><|AUDIO|><|audio_eos|>"},
        "ids": {"image_token_index": "<|IMAGE|>", "video_token_index": "<|VIDEO|>",
                "audio_token_index": "<|AUDIO|>", "audio_start_token_id": "<|audio_bos|>",
                "audio_end_token_id": "<|audio_eos|>", "vision_start_token_id": "<|vision_bos|>",
                "vision_end_token_id": "<|vision_eos|>", "user_token_id": "user"},
        "named": {"image_token": "<|IMAGE|>", "audio_token": "<|AUDIO|>",
                  "video_token": "<|VIDEO|>", "vision_bos_token": "<|vision_bos|>",
                  "vision_eos_token": "<|vision_eos|>", "audio_bos_token": "<|audio_bos|>",
                  "audio_eos_token": "<|audio_eos|>"},
    },
}
#: How each media part type of a chat message maps to a modality.
PART_TYPES = {"image": ("image", "image_url"), "video": ("video", "video_url"),
              "audio": ("audio", "audio_url", "input_audio")}


def chat_template(tags: dict[str, str]) -> str:
    """Qwen's chat format without a default system prompt (as build_omni.py: the first
    block is the caller's own text); a part the model cannot take fails the render."""
    branches = "".join(f"{{%- {'if' if i == 0 else 'elif'} part['type'] in {PART_TYPES[m]!r} -%}}"
                       f"{tag}" for i, (m, tag) in enumerate(tags.items()))
    return (
        "{%- for message in messages -%}"
        "<|im_start|>{{ message['role'] + '\\n' }}"
        "{%- if message['content'] is string -%}{{ message['content'] }}"
        "{%- else -%}{%- for part in message['content'] -%}"
        f"{branches}"
        "{%- elif part['type'] == 'text' -%}{{ part['text'] }}"
        "{%- else -%}{{ raise_exception('this model takes no ' + part['type'] + ' parts') }}"
        "{%- endif -%}{%- endfor -%}{%- endif -%}"
        "{{ '<|im_end|>\\n' }}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
    )


def build_tokenizer(bpe: str, special: list[str], family: dict,
                    max_len: int) -> PreTrainedTokenizerFast:
    """Qwen2's byte-level BPE from the ranks file, NFC-normalised, the special tokens next."""
    core = TikTokenConverter(vocab_file=bpe, pattern=QWEN2_PATTERN).converted()
    core.normalizer = normalizers.NFC()
    ranks = core.get_vocab_size()
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", model_max_length=max_len,
                                  additional_special_tokens=special,
                                  extra_special_tokens=family["named"] or None)
    for i, text in enumerate(special):
        assert tok.convert_tokens_to_ids(text) == ranks + i, f"{text}: not at id {ranks + i}"
    for name, text in family["named"].items():
        setattr(tok, name, text)
    tok.chat_template = chat_template(family["tags"])
    return tok


def check_ids(config: dict, family: dict, tok: PreTrainedTokenizerFast) -> None:
    """Every token id the config names is the token it means in the tokenizer."""
    for key, text in family["ids"].items():
        if key in config:
            got = tok.convert_tokens_to_ids(text)
            assert got == config[key], f"config {key}={config[key]} but {text} is {got}"


def parameters(out: Path) -> int:
    """The served model's parameter count (Qwen2.5-Omni: its thinker), instantiated on the
    meta device (no memory)."""
    config = AutoConfig.from_pretrained(out)
    with torch.device("meta"):
        if config.model_type == "qwen2_5_omni":
            model = Qwen2_5OmniThinkerForConditionalGeneration(config.thinker_config)
        else:
            model = AutoModelForImageTextToText.from_config(config)
    return sum(p.numel() for p in model.parameters())


def build(preset: dict, out: Path) -> dict:
    config = preset["config"]
    family = FAMILIES[config["model_type"]]
    ids = config.get("thinker_config", config)
    text = ids.get("text_config", ids)
    tok = build_tokenizer(preset["bpe"], preset["special_tokens"], family,
                          text["max_position_embeddings"])
    check_ids(ids, family, tok)
    media = {"image_processor": Qwen2VLImageProcessor(**preset["processor"]),
             "video_processor": Qwen2VLVideoProcessor(**preset["processor"]),
             "tokenizer": tok, "chat_template": tok.chat_template}
    processor = (Qwen2_5OmniProcessor(**media, feature_extractor=WhisperFeatureExtractor(
        feature_size=ids["audio_config"]["num_mel_bins"]))
        if "audio" in family["tags"] else Qwen2_5_VLProcessor(**media))
    out.mkdir(parents=True, exist_ok=True)
    processor.save_pretrained(out)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
         "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}, indent=2) + "\n")
    return {"parameters": parameters(out), "vocab_size": len(tok)}


if __name__ == "__main__":
    summary = build(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
    print(json.dumps(summary))
