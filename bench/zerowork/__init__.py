"""A zero-work target: an aiohttp server shaped like vLLM's HTTP surface that answers at once.

It serves what saltbench calls (health, models, version, server info, OpenAPI routes,
``/metrics``, chat completions, render and the three forms of ``/inference/v1/generate``)
with vLLM's stream shapes, a trivial deterministic tokeniser and an honest prefix-cache
simulation, so that a run against it is judged like one against vLLM while the server
itself costs next to nothing. Start it with ``python -m bench.zerowork --port P`` or
:class:`~bench.zerowork.process.ZeroWorkServer`.
"""

from bench.zerowork.process import ZeroWorkServer

__all__ = ["ZeroWorkServer"]
