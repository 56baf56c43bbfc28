"""saltbench: multimodal cache-salt benchmarking for vLLM."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("saltbench")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"

#: Version of the on-disk result formats (records JSONL, results JSON, manifests).
SCHEMA_VERSION = 1
