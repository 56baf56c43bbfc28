"""TEST ONLY: engine interpreters whose vLLM engine core is slower by a known fraction."""

from __future__ import annotations

import shlex
from pathlib import Path

HERE = Path(__file__).resolve().parent


def slowed_python(python: Path, fraction: float, where: Path) -> Path:
    """An executable in ``where`` that runs ``python`` with every engine-core step made
    ``fraction`` slower (``sitecustomize`` in this folder); usable as ``--engine-python``."""
    where.mkdir(parents=True, exist_ok=True)
    wrapper = where / f"python-slowed-{fraction:g}"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"export SALTBENCH_TEST_SLOWDOWN={fraction:g}\n"
        f'export PYTHONPATH={shlex.quote(str(HERE))}"${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        f'exec {shlex.quote(str(python))} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper
