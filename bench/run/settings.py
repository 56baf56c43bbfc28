"""Every option of a run: how the workload is sent (recorded in the results)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.client.stream import CONNECT_TIMEOUT_S
from bench.vocab import SALT_MODES


@dataclass
class RunOptions:
    """How to send the workload (recorded in the results)."""

    paths: list[str]
    salt_modes: list[str] = field(default_factory=lambda: list(SALT_MODES))
    rate: float | None = None  # None: the workload's arrival times, else all at once
    burstiness: float = 1.0
    max_concurrency: int | None = 1
    warmup: int = 2
    prime: bool = False
    timeout_s: float = 600.0  # per request, in all
    connect_timeout_s: float = CONNECT_TIMEOUT_S  # per request, to open its connection
    first_byte_timeout_s: float | None = None  # per request, from its send to a first byte
    media_url: str = "data"
    audio_part: str = "audio_url"
    seed: int = 0
    repeat: int = 1
    #: Stop sending after this many seconds (None: no deadline); what is left is unsent.
    deadline_s: float | None = None
    #: Processes that send the measured requests (bench.run.workers); 1: this one.
    workers: int = 1
    #: The Ray cluster whose actors are the workers (bench.run.ray_workers); None: local.
    ray: str | None = None
    #: Requests the cache model cannot judge exactly do not fail the run
    #: (bench.verdicts.runs.unjudged_problem).
    allow_unjudged: bool = False
    #: Service-level objectives in ms by name (bench.goodput); None: no goodput.
    goodput: dict[str, float] | None = None
    #: Test-only: paths whose builder drops the salt (proves that a leak is caught).
    drop_salt_on: tuple[str, ...] = ()
