"""HTTP client building blocks for the load runner: streaming requests and arrival shapes."""

from bench.client.loadshape import arrival_offsets, dispatch
from bench.client.stream import StreamResult, post_stream

__all__ = ["StreamResult", "arrival_offsets", "dispatch", "post_stream"]
