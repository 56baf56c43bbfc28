"""saltbench: multimodal cache-salt benchmarking for vLLM."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("saltbench")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"

#: Version of the run documents (records and layouts JSONL, results and isolation JSON);
#: 2: requests judged by the prefix-cache model (layouts.jsonl), build and token timings.
SCHEMA_VERSION = 2
