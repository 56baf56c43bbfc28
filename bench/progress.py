"""A progress bar on terminals; nothing in logs and CI (each finished request is a record)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn


def progress_bar(console: Console, description: str, total: int) -> Progress:
    """A rich Progress with one task; use as a context manager, ``advance`` its task."""
    progress = Progress("[progress.description]{task.description}", BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                        disable=not console.is_terminal)
    progress.add_task(description, total=total)
    return progress
