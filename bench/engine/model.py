"""Local models built offline, by preset: small random-weight Qwen2.5-Omni thinkers
(``tiny``, ``medium``) and real architectures without weights (:mod:`bench.engine.reference`).

The build runs ``scripts/build_omni.py`` (``build_reference.py``) in the engine environment
and is cached under ``<cache>/models/<preset>-<key>``, keyed by the preset, the builder
script and the engine's transformers version: the same key gives the same files. The directory
appears in one rename, with :data:`FILES_MANIFEST` (every file's size and sha256);
a reused model whose files differ from it is built again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bench.cachedirs import cache_dir, locked
from bench.docio import read_document, replace_dir, write_json
from bench.engine.environment import EngineEnv
from bench.engine.provision import script
from bench.engine.reference import BPE_SHA256, REFERENCES, bpe_file, needed_gib
from bench.engine.spec import has_cuda_gpu
from bench.errors import BenchError
from bench.media import file_digest, file_problem

log = logging.getLogger(__name__)
#: Written last into a built model directory: ``{"files": {name: {"bytes", "sha256"}}}``.
FILES_MANIFEST, FILES_KIND, FILES_VERSION = "saltbench-model.json", "saltbench-model-files", 1

_AUDIO = {"num_mel_bins": 128, "max_source_positions": 1500, "n_window": 100}
_VISION = {"patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 112}
_PROCESSORS = {
    "image_processor": {"min_pixels": 56 * 56, "max_pixels": 1280 * 28 * 28},
    "video_processor": {"min_pixels": 56 * 56, "max_pixels": 256 * 28 * 28},
}

#: Presets. ``tiny`` is for tests (fast start, encoder-bound). ``medium`` has a
#: ~47M-parameter language model so that prefill dominates time to first token on a CPU.
PRESETS: dict[str, dict] = {
    "tiny": {
        "max_model_len": 8192, "mrope_section": [8, 4, 4],
        "text": {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2},
        "vision": {**_VISION, "depth": 2, "hidden_size": 64, "intermediate_size": 128,
                   "num_heads": 2, "fullatt_block_indexes": [1]},
        "audio": {**_AUDIO, "encoder_layers": 2, "encoder_attention_heads": 2,
                  "encoder_ffn_dim": 128, "d_model": 64},
        **_PROCESSORS,
    },
    "medium": {
        "max_model_len": 8192, "mrope_section": [16, 24, 24],
        "text": {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4,
                 "num_attention_heads": 8, "num_key_value_heads": 2},
        "vision": {**_VISION, "depth": 2, "hidden_size": 128, "intermediate_size": 256,
                   "num_heads": 4, "fullatt_block_indexes": [1]},
        "audio": {**_AUDIO, "encoder_layers": 2, "encoder_attention_heads": 2,
                  "encoder_ffn_dim": 256, "d_model": 128},
        **_PROCESSORS,
    },
}


#: The demo's model on a CUDA GPU.
GPU_DEMO_PRESET = "qwen2.5-omni-7b"
#: Every preset ``--model-preset`` takes.
PRESET_NAMES = sorted([*PRESETS, *REFERENCES])


@dataclass(frozen=True)
class LocalModel:
    """A built model directory, how the server must load it and what its build reported."""

    path: Path
    preset: str
    load_format: str = "dummy"
    built: dict = field(default_factory=dict, compare=False)

    @property
    def served_name(self) -> str:
        return f"saltbench-{self.preset}" if self.preset in REFERENCES else \
            f"saltbench-omni-{self.preset}"

    def metadata(self) -> dict:
        meta = {"model": self.served_name, "preset": self.preset, "path": str(self.path),
                "load_format": self.load_format}
        if self.preset in REFERENCES:
            ref = REFERENCES[self.preset]
            return {**meta, "architecture": ref["config"]["architectures"][0],
                    "reference": ref["model"], "parameters": self.built.get("parameters"),
                    "modalities": ref["modalities"]}
        return {**meta, "architecture": "Qwen2_5OmniModel (thinker)",
                "parameters": PRESETS[self.preset]}

    def needed_gib(self, max_model_len: int) -> float | None:
        """GiB a GPU server of a real architecture needs at least (None: a small preset)."""
        if self.preset not in REFERENCES or "parameters" not in self.built:
            return None
        return needed_gib(self.built["parameters"], REFERENCES[self.preset]["config"],
                          max_model_len)


def demo_preset(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The demo's model: on a CUDA GPU the real Qwen2.5-Omni-7B thinker (every modality;
    refused before start where it does not fit); on a CPU ``medium`` where its prefill is
    fast (AVX-512, vLLM's fast CPU path), else ``tiny``. On an AVX2-only CPU vLLM falls back
    from oneDNN to plain torch matmuls: the medium model's prefill ran at 50-80 tokens/s
    there (2026-12-04), while the tiny model's prefix hits were still 5x faster than misses."""
    if has_cuda_gpu():
        return GPU_DEMO_PRESET
    try:
        flags = next((line for line in cpuinfo.read_text().splitlines()
                      if line.startswith("flags")), "")
    except OSError:
        return "tiny"
    return "medium" if "avx512f" in flags.split() else "tiny"


def _builder(preset: str) -> tuple[str, dict]:
    """The builder script of ``preset`` and what it is given (without machine paths)."""
    if preset in REFERENCES:
        return "build_reference.py", {**REFERENCES[preset], "bpe_sha256": BPE_SHA256}
    return "build_omni.py", PRESETS[preset]


def model_key(preset: str, transformers_version: str) -> str:
    """Cache key: preset, builder script and transformers version."""
    name, given = _builder(preset)
    blob = json.dumps([given, script(name).read_text(), transformers_version], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def build_model(env: EngineEnv, preset: str) -> LocalModel:
    """Build (or reuse) the model for ``preset`` with the engine environment ``env``."""
    if preset not in PRESET_NAMES:
        raise BenchError(f"model preset {preset!r}: unknown; known: {', '.join(PRESET_NAMES)}")
    out = cache_dir("models") / f"{preset}-{model_key(preset, env.info['versions']['transformers'])}"
    with locked(out):
        problem = damage(out)
        if problem is not None:
            if out.exists():
                log.warning("%s; building the model again", problem)
            _build(env, preset, out)
    built = read_document(out / FILES_MANIFEST, FILES_KIND, FILES_VERSION).get("built", {})
    return LocalModel(out, preset, built=built)


def damage(out: Path) -> str | None:
    """What is wrong with a built model directory (a file missing or changed), or ``None``."""
    try:
        files = read_document(out / FILES_MANIFEST, FILES_KIND, FILES_VERSION)["files"]
    except BenchError as exc:
        return str(exc)
    for name, want in files.items():
        problem = file_problem(out / name, want["sha256"], want["bytes"])
        if problem:
            return f"{out / name}: {problem}"
    return None


def _build(env: EngineEnv, preset: str, out: Path) -> None:
    """Run the builder into a directory beside ``out``, record its files, move it to ``out``."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    name, given = _builder(preset)
    if preset in REFERENCES:
        given = {**given, "bpe": str(bpe_file(env))}
    (tmp / "preset.json").write_text(json.dumps(given, indent=2, sort_keys=True))
    try:
        proc = subprocess.run([str(env.python), str(script(name)), str(tmp / "preset.json"),
                               str(tmp)],
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BenchError(f"building model preset {preset!r} took over 600 s") from None
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BenchError(f"building model preset {preset!r} failed:\n{proc.stderr[-3000:]}")
    files = {}
    for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
        sha, size = file_digest(path)
        files[path.relative_to(tmp).as_posix()] = {"bytes": size, "sha256": sha}
    write_json(tmp / FILES_MANIFEST,
               {"kind": FILES_KIND, "schema_version": FILES_VERSION, "files": files,
                "built": json.loads(proc.stdout.strip().splitlines()[-1])})
    replace_dir(tmp, out)
