"""Per-request records as JSON Lines, written so that a killed run keeps every finished one.

:class:`Record` lists every field; :class:`RecordWriter` writes ``records.jsonl``,
:func:`read_records` and :class:`PassLines` (a pass at a time) read it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, TypedDict

import orjson

from bench.errors import BenchError

log = logging.getLogger(__name__)


class Exchange(TypedDict):
    """What one request measured (``bench.run.exchange``); timings in ms."""

    ok: bool
    status: int | None
    failure: str | None  # bench.vocab.FAILURES; None when ok
    error: str | None  # the failure in words
    prompt_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    build_ms: float | None  # building the request before it is sent
    ttft_ms: float | None  # as vllm bench serve: from the send to the first chunk with choices
    ttft_incl_preprocess_ms: float | None  # TTFT plus media preprocessing done in the build
    e2el_ms: float | None
    itl_ms: list[float]  # as vllm bench serve: gaps between chunks with choices
    itl_token_ms: list[float]  # gaps between chunks that carry generated tokens


class Record(Exchange, total=False):
    """One line of ``records.jsonl`` (schema :data:`bench.SCHEMA_VERSION`)."""

    schema_version: int
    run_id: str
    phase: str              # bench.vocab.PHASES
    # "pass": the pass index (a Python keyword, so not declarable here)
    path: str               # request path name
    salt_mode: str          # bench.vocab.SALT_MODES
    salt_digest: str | None  # never the salt itself
    request_id: str
    case: str
    tenant: str
    modality: str           # bench.vocab.MODALITY_LABELS
    oracle: str             # the workload oracle's expectation
    start_s: float          # since the run started, before the request was built
    end_s: float            # since the run started, when its stream ended
    seq: int                # the order in which requests finished
    # Added in memory by bench.verdicts.requests.Judgements.annotate, never written:
    judgement: str          # bench.vocab.Judged
    cached_lower: int       # cached tokens the salt rules guarantee
    cached_upper: int       # cached tokens the salt rules allow
    output_block_tokens: int  # of cached_upper: blocks an earlier request's output filled
    unknown_source_tokens: int  # of cached_upper: what only a request without a layout allows
    expected_cached_tokens: int | None  # exact expectation (lower == upper), else None
    leaked_tokens: int      # above the upper bound
    missing_tokens: int     # below the lower bound


class LayoutLine(TypedDict, total=False):
    """One line of ``layouts.jsonl``: a request's prompt as the engine hashes it
    (:mod:`bench.verdicts.prefix_model`), rendered by the server after its pass."""

    # "pass": the pass index
    request_id: str
    n_tokens: int
    block_keys: list[str]
    error: str  # instead of the above when the render failed


@dataclass
class PassInfo:
    """One (path, salt mode) pass of one repetition: its tag, measured duration and
    counter deltas."""

    index: int
    path: str
    salt_mode: str
    tag: str
    repetition: int = 0
    duration_s: float = 0.0
    counters: dict = field(default_factory=dict)
    counters_error: str | None = None  # why ``counters`` is empty (not scraped, reset)
    #: Behind a router: how requests were attributed and each replica's counter delta
    #: (``bench.run.replicas.PerReplica.delta``); empty for a single server.
    replicas: dict = field(default_factory=dict)
    #: With ``--ray``: each sender's node, host, clock offset and any loss
    #: (:mod:`bench.run.ray_workers`); empty otherwise.
    senders: list = field(default_factory=list)


class RecordWriter:
    """Appends one JSON object per line to ``path``; a context manager.

    With ``max_delay_s`` 0 every line is flushed as it is written. Above 0, inside an
    event loop, lines are batched and flushed at most ``max_delay_s`` after the first of a
    batch (one write call instead of one per request in the hot loop), and on exit. A
    flushed line survives the process being interrupted or killed (a SIGKILL may lose the
    last ``max_delay_s``; not a machine crash: a disk sync per line would stall the event
    loop). A partial last line left by an interrupted earlier run is cut off when the file
    is opened, so appending never buries it mid-file.
    """

    def __init__(self, path: str | os.PathLike[str], max_delay_s: float = 0.0) -> None:
        self.path = Path(path)
        self.max_delay_s = max_delay_s
        self._file: BinaryIO | None = None
        self._batch: list[bytes] = []
        self._timer: asyncio.TimerHandle | None = None

    def __enter__(self) -> RecordWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a+b")
        _drop_partial_last_line(self._file, self.path)
        return self

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` (a :class:`Record` or a :class:`LayoutLine`) as one line."""
        if self._file is None:
            raise RuntimeError("RecordWriter.write outside its 'with' block")
        self._batch.append(orjson.dumps(record) + b"\n")
        if self._timer is None and self.max_delay_s > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                self._timer = loop.call_later(self.max_delay_s, self.flush)
                return
        if self._timer is None:
            self.flush()

    def flush(self) -> None:
        """Write the batch out (one system call)."""
        self._timer = None
        if self._batch and self._file is not None:
            self._file.write(b"".join(self._batch))
            self._file.flush()
            self._batch.clear()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None


def _drop_partial_last_line(file: BinaryIO, path: Path) -> None:
    size = file.seek(0, os.SEEK_END)
    if size == 0:
        return
    file.seek(size - 1)
    if file.read(1) == b"\n":
        return
    file.seek(0)
    keep = file.read().rfind(b"\n") + 1
    log.warning("%s: dropping a truncated last line (%d bytes) before appending", path, size - keep)
    file.truncate(keep)
    file.seek(0, os.SEEK_END)


def _lines(path: Path) -> Iterator[tuple[int, dict]]:
    """``(offset, object)`` of each line of a records file, read line by line; a truncated
    last line is skipped with a warning, any other line that is not a JSON object raises
    ``BenchError`` naming the file and line."""
    try:
        with open(path, "rb") as fh:
            offset = 0
            for number, line in enumerate(fh, start=1):
                start, offset = offset, offset + len(line)
                if not line.strip():
                    continue
                try:
                    record = orjson.loads(line)
                except ValueError as exc:
                    if not line.endswith(b"\n"):  # the last line, cut off mid-write
                        log.warning("%s:%d: skipping truncated last line (interrupted run?)",
                                    path, number)
                        continue
                    raise BenchError(f"{path}:{number}: corrupt record: {exc}") from exc
                if not isinstance(record, dict):
                    raise BenchError(f"{path}:{number}: record is not a JSON object")
                yield start, record
    except OSError as exc:
        raise BenchError(f"cannot read records file {path}: {exc}") from exc


def iter_records(path: str | os.PathLike[str]) -> Iterator[Record]:
    """A records file's records, one at a time (see :func:`_lines` for what is skipped and
    what raises)."""
    return (record for _, record in _lines(Path(path)))  # type: ignore[misc]


def read_records(path: str | os.PathLike[str]) -> list[Record]:
    """A records file's records, all in memory."""
    return list(iter_records(path))


class PassLines:
    """The lines of a records or layouts file by pass, read one pass at a time: only each
    line's offset is kept, so memory is bounded by the largest pass, not the run."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._offsets: dict[int, array] = {}
        if self.path.exists():
            for offset, line in _lines(self.path):
                self._offsets.setdefault(line["pass"], array("q")).append(offset)

    def indices(self) -> list[int]:
        """The passes that have lines, in order."""
        return sorted(self._offsets)

    def read(self, index: int) -> Iterator[dict]:
        """The lines of pass ``index``, in file order, one at a time."""
        with open(self.path, "rb") as fh:
            for offset in self._offsets.get(index, ()):
                fh.seek(offset)
                yield orjson.loads(fh.readline())
