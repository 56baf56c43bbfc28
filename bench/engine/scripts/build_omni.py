"""Build a random-weight Qwen2.5-Omni thinker model directory, offline.

Runs inside the ENGINE environment (it needs transformers and tokenizers):
    python build_omni.py PRESET_JSON OUT_DIR
The weights are not written: the server loads it with ``--load-format dummy``
(vLLM fills every parameter from a fixed seed). Prints a JSON summary on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2_5OmniConfig,
    Qwen2_5OmniProcessor,
    Qwen2VLImageProcessor,
    WhisperFeatureExtractor,
)
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

# Named special tokens, read by the processor and by vLLM's Qwen2.5-Omni support.
NAMED_TOKENS = {
    "image_token": "<|IMAGE|>",
    "audio_token": "<|AUDIO|>",
    "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
}
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *NAMED_TOKENS.values()]

# No default system prompt: the first block of a prompt must be the caller's own
# text, so that independent cases never share prefix-cache keys by accident.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|im_start|>{{ message['role'] }}\n"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] in ('image', 'image_url') -%}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{%- elif part['type'] in ('video', 'video_url') -%}<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{%- elif part['type'] in ('audio', 'audio_url', 'input_audio') -%}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}"
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (gone from transformers 5)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def build_tokenizer(model_max_length: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE with 256 byte symbols, no merges, plus the special tokens."""
    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=model_max_length,
        extra_special_tokens=NAMED_TOKENS,
    )
    tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS})
    for name, text in NAMED_TOKENS.items():
        setattr(tok, name, text)
    tok.chat_template = CHAT_TEMPLATE
    for text in SPECIAL_TOKENS:
        ids = tok.encode(text, add_special_tokens=False)
        assert len(ids) == 1, f"special token {text} encodes to {ids}"
    return tok


def build(preset: dict, out: Path) -> dict:
    text, vision, audio = preset["text"], preset["vision"], preset["audio"]
    tok = build_tokenizer(preset["max_model_len"])
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    vocab_size = -(-len(tok) // 64) * 64
    thinker = {
        "text_config": {**text, "vocab_size": vocab_size, "max_position_embeddings": 32768,
                        "rope_scaling": {"type": "mrope", "mrope_section": preset["mrope_section"]},
                        "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|endoftext|>"]},
        "vision_config": {**vision, "out_hidden_size": text["hidden_size"]},
        "audio_config": {**audio, "output_dim": text["hidden_size"]},
        "image_token_index": ids["<|IMAGE|>"],
        "video_token_index": ids["<|VIDEO|>"],
        "audio_token_index": ids["<|AUDIO|>"],
        "audio_start_token_id": ids["<|audio_bos|>"],
        "audio_end_token_id": ids["<|audio_eos|>"],
        "vision_start_token_id": ids["<|vision_bos|>"],
        "vision_end_token_id": ids["<|vision_eos|>"],
        "user_token_id": tok.convert_tokens_to_ids("u"),
    }
    config = Qwen2_5OmniConfig(thinker_config=thinker, enable_audio_output=False)
    config.architectures = ["Qwen2_5OmniModel"]
    processor = Qwen2_5OmniProcessor(
        image_processor=Qwen2VLImageProcessor(**preset["image_processor"]),
        video_processor=Qwen2VLVideoProcessor(**preset["video_processor"]),
        feature_extractor=WhisperFeatureExtractor(feature_size=audio["num_mel_bins"]),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    processor.save_pretrained(out)
    (out / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|endoftext|>"]}, indent=2) + "\n")
    return {"vocab_size": vocab_size, "special_token_ids": ids}


if __name__ == "__main__":
    summary = build(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
    print(json.dumps(summary))
