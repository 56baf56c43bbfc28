"""What every peer driver shares: the run it is given, the result it returns, and the
measured subprocess (its own process group; CPU time and peak RSS of its process tree).

A driver turns a :class:`PeerRun` into the tool's command line and dataset files
(:meth:`Driver.command`), and the tool's own output files into :class:`ToolMetrics`
(:meth:`Driver.parse`); :meth:`Driver.run` runs it and adds what it cost the client.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import psutil
from rich.console import Console

from bench.engine.server import kill_group
from bench.errors import BenchError
from bench.media import image, rng
from bench.peers import provision as peer_envs

#: Environment of every tool: no telemetry, no colour codes in its log.
TOOL_ENV = {"HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "NO_COLOR": "1",
            "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
#: Hugging Face libraries offline: every tool loads only the local tokenizer.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
#: How often the tool's process tree is sampled (resident memory, CPU time).
SAMPLE_S = 0.25
_WORDS = ("cache salt prefix block token image frame pixel tenant request stream latency "
          "bench model server client queue batch vision encoder").split()
#: The word-level tokenizer's one special token: every word it does not know.
_UNK = "[UNK]"


@dataclass(frozen=True)
class Prompt:
    """One request's user message: text and, for image prompts, one image as a ``data:`` URL."""

    text: str
    image_url: str | None = None

    def content(self) -> str | list[dict]:
        """The message content in OpenAI chat form."""
        if self.image_url is None:
            return self.text
        return [{"type": "text", "text": self.text},
                {"type": "image_url", "image_url": {"url": self.image_url}}]


def make_prompts(count: int, *, images: bool = False, words: int = 64,
                 image_px: int = 64) -> tuple[Prompt, ...]:
    """``count`` distinct prompts of ``words`` words (a unique first word each), each with its
    own ``image_px``-square PNG, encoded once, when ``images``."""
    prompts = []
    for i in range(count):
        picks = rng(i).integers(0, len(_WORDS), words - 1)
        text = " ".join([f"prompt{i:06d}", *(_WORDS[k] for k in picks)])
        url = None
        if images:
            buf = io.BytesIO()
            image.render("gradient", image_px, image_px, seed=i).save(buf, "PNG")
            url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
        prompts.append(Prompt(text, url))
    return tuple(prompts)


@dataclass(frozen=True)
class PeerRun:
    """One measured run of a peer against a server."""

    base_url: str  # e.g. http://127.0.0.1:8000, no /v1
    model: str
    prompts: tuple[Prompt, ...]  # cycled when ``requests`` is larger
    output_tokens: int = 16
    concurrency: int = 1
    requests: int = 200
    rate: float | None = None  # requests/s; None: closed loop at ``concurrency``
    timeout_s: float = 900.0

    @property
    def images(self) -> bool:
        return any(p.image_url for p in self.prompts)

    def sampling(self) -> dict:
        """Request fields that fix the output length (vLLM honours both)."""
        return {"ignore_eos": True, "min_tokens": self.output_tokens}

    def cycled(self) -> list[Prompt]:
        """Exactly ``requests`` prompts, the set repeated in order."""
        n = len(self.prompts)
        return [self.prompts[i % n] for i in range(self.requests)]


@dataclass(frozen=True)
class ToolMetrics:
    """What the tool itself reports, in its own definitions of TTFT and ITL."""

    completed: int
    failed: int
    duration_s: float
    request_throughput: float  # completed requests per second
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None


@dataclass(frozen=True)
class PeerResult:
    """A tool's metrics and what it cost: CPU seconds and peak RSS of its whole process tree."""

    tool: str
    version: str
    command: list[str]
    metrics: ToolMetrics
    cpu_s: float
    peak_rss_mb: float
    wall_s: float

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Usage:
    """Resources of a finished process tree."""

    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def run_measured(argv: list[str], *, cwd: Path, log: Path, env: dict[str, str],
                 timeout_s: float) -> Usage:
    """Run ``argv`` in its own process group, output to ``log``; its tree's CPU time and peak RSS.

    CPU time is the larger of what ``wait4`` reports (the tool and every descendant it reaped)
    and the sum of the last CPU times sampled per process (descendants it did not reap).
    Peak RSS is the largest sampled sum over the tree. Whatever is left of the group at the
    end (or on any error) is killed.
    """
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    cpu: dict[int, float] = {}
    peak = 0
    try:
        root = psutil.Process(proc.pid)
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout_s:
                raise BenchError(f"{argv[0]} did not finish within {timeout_s:.0f}s; see {log}")
            rss = 0
            for p in _tree(root):
                with contextlib.suppress(psutil.Error):
                    with p.oneshot():
                        t = p.cpu_times()
                        cpu[p.pid] = t.user + t.system
                        rss += p.memory_info().rss
            peak = max(peak, rss)
            time.sleep(SAMPLE_S)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        kill_group(proc.pid)
        if proc.returncode is None:
            proc.wait()
    reaped = rusage.ru_utime + rusage.ru_stime
    return Usage(proc.returncode, time.monotonic() - start, max(reaped, sum(cpu.values())),
                 max(peak, rusage.ru_maxrss * 1024) / 2**20)


def write_tokenizer(directory: Path, texts: list[str]) -> Path:
    """A word-level Hugging Face tokenizer over the words of ``texts`` (unknown words: one
    ``[UNK]`` each), so that every tool counts tokens offline and alike."""
    words = sorted({w for t in texts for w in t.split()})
    vocab = {_UNK: 0, **{w: i + 1 for i, w in enumerate(words)}}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": _UNK, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
        "decoder": None, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": _UNK}}))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": _UNK,
        "model_max_length": 1 << 20,
        "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                         "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"}))
    return directory


class Driver(ABC):
    """One peer tool: how to call it, and how to read what it wrote."""

    name: ClassVar[str]
    #: Whether the tool can pace requests by a rate (``PeerRun.rate``).
    supports_rate: ClassVar[bool] = True
    #: Whether the tool runs with :data:`OFFLINE_ENV`.
    offline: ClassVar[bool] = True
    #: What follows the tool's executable to start a benchmark (``aiperf profile``).
    subcommand: ClassVar[tuple[str, ...]] = ()

    def __init__(self, prefix: list[str], version: str) -> None:
        self.prefix, self.version = prefix, version  # the tool's command up to its options

    @classmethod
    def _on(cls, env: peer_envs.PeerEnv) -> Driver:
        return cls([str(env.executable), *cls.subcommand], env.info["versions"][cls.name])

    @classmethod
    def find(cls) -> Driver | None:
        """The driver on the tool's provisioned environment, or None (never builds one)."""
        env = peer_envs.find_env(cls.name)
        return env and cls._on(env)

    @classmethod
    def provision(cls, console: Console | None = None) -> Driver:
        """The driver on the tool's environment, built first if needed."""
        return cls._on(peer_envs.provision(cls.name, console))

    @abstractmethod
    def command(self, run: PeerRun, workdir: Path, tokenizer: Path) -> list[str]:
        """The tool's full command line; writes the dataset it reads into ``workdir``."""

    @abstractmethod
    def parse(self, workdir: Path) -> ToolMetrics:
        """The tool's metrics, from the files it wrote into ``workdir``."""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in OFFLINE_ENV}
        return {**env, **TOOL_ENV, **(OFFLINE_ENV if self.offline else {})}

    def run(self, run: PeerRun, workdir: Path) -> PeerResult:
        """Run the tool against ``run.base_url`` in an empty ``workdir``; a BenchError if it
        reports nothing."""
        if workdir.exists() and any(workdir.iterdir()):
            raise BenchError(f"{workdir}: not empty (a result left there could be read as this run's)")
        workdir.mkdir(parents=True, exist_ok=True)
        tokenizer = write_tokenizer(workdir / "tokenizer", [p.text for p in run.prompts])
        argv = self.command(run, workdir, tokenizer)
        log = workdir / f"{self.name}.log"
        usage = run_measured(argv, cwd=workdir, log=log, env=self.env(),
                             timeout_s=run.timeout_s)
        try:
            metrics = self.parse(workdir)
        except (OSError, ValueError, KeyError, IndexError) as exc:
            raise BenchError(f"{self.name} (exit {usage.returncode}) left no readable result "
                             f"({exc}); see {log}") from None
        return PeerResult(self.name, self.version, argv, metrics, round(usage.cpu_s, 3),
                          round(usage.peak_rss_mb, 1), round(usage.wall_s, 3))
