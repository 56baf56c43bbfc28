"""TEST ONLY: make every step of vLLM's engine core slower by a known fraction.

Loaded by the interpreters that :func:`tests.slowdown.slowed_python` writes (this folder is
their ``PYTHONPATH``), never by saltbench itself: a user's run cannot reach it. When
``vllm.v1.engine.core`` is imported, ``EngineCore.step`` and ``step_with_batch_queue`` are
wrapped so that each call keeps its thread busy for ``SALTBENCH_TEST_SLOWDOWN`` times its
own duration: a server-side slow-down of that size, for the tests and the A/B power benchmark.

It busy-waits (holding the GIL, as the step's own Python code does) instead of sleeping:
``time.sleep`` of 50-200 us took 65-90 us longer here (timer slack), so a "10%" sleep after
a 1 ms decode step made it about 17% slower (the campaigns before 2026-12-07 were run that
way: docs/ab.md).
"""

import importlib.abc
import importlib.util
import os
import sys
import time

TARGET = "vllm.v1.engine.core"
FRACTION = float(os.environ.get("SALTBENCH_TEST_SLOWDOWN", "0") or 0)


def _slowed(step):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return step(*args, **kwargs)
        finally:
            ended = time.perf_counter()
            until = ended + (ended - started) * FRACTION
            while time.perf_counter() < until:
                pass

    wrapper.__wrapped__ = step
    return wrapper


def _patch(module) -> None:
    core = module.EngineCore
    for name in ("step", "step_with_batch_queue"):
        if hasattr(core, name):
            setattr(core, name, _slowed(getattr(core, name)))
    print(f"saltbench test slowdown: EngineCore steps slowed by {FRACTION:.1%} "
          f"(pid {os.getpid()})", file=sys.stderr, flush=True)


class _Finder(importlib.abc.MetaPathFinder):
    """Patches the engine core module right after it is executed, in every process."""

    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if FRACTION > 0:
    sys.meta_path.insert(0, _Finder())
