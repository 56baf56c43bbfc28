"""The per-run secret that raw salts are derived from (:func:`bench.salts.derive`).

It is kept only in a private file in the run directory (mode 0600), never in records,
results or reports, so that ``run --resume`` sends the same salts as the run it continues.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from bench.errors import BenchError

SECRET_FILE = ".salt-secret"


def create_secret(run_dir: Path) -> str:
    """A new secret, written to ``run_dir``'s private secret file (which must not exist)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(16)
    tmp = run_dir / f"{SECRET_FILE}.{os.getpid()}.partial"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(secret + "\n")
        os.link(tmp, run_dir / SECRET_FILE)  # whole or absent; never replaces another run's
    finally:
        tmp.unlink(missing_ok=True)
    return secret


def read_secret(run_dir: Path) -> str:
    """The secret of the run in ``run_dir``; a BenchError naming the file if it is missing,
    readable by others or not a secret."""
    path = run_dir / SECRET_FILE
    try:
        mode = path.stat().st_mode & 0o777
        text = path.read_text().strip()
    except OSError as exc:
        raise BenchError(f"{path}: cannot read the run's secret ({exc.strerror}); without it "
                         "the run's salts cannot be derived again") from None
    if mode & 0o077:
        raise BenchError(f"{path}: readable by others (mode {mode:o}); `chmod 600` it")
    if not re.fullmatch(r"[0-9a-f]{32}", text):
        raise BenchError(f"{path}: not a saltbench run secret")
    return text
