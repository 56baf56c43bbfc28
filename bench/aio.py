"""The event loop saltbench runs on: uvloop where it is installed, else asyncio's own.

uvloop (libuv) takes less time per loop iteration; a client at concurrency 1 spends much
of each request there (docs/performance.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the fastest kind installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, on uvloop where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
