"""Spec -> workload directory: requests streamed to ``requests.jsonl`` with a cache-hit oracle.

The oracle is message-level: the earlier request sharing the most leading messages (media
compared by sha256) and whether vLLM may reuse that prefix, which needs the same salt
reference or no salt on both sides.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import shutil
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench import __version__
from bench.cachedirs import cache_dir, locked
from bench.docio import replace_dir
from bench.errors import BenchError
from bench.media import file_problem, library_versions
from bench.vocab import EXPECTATIONS, MEDIA_MODALITIES
from bench.workload import manifest
from bench.workload.pool import PREFIX, MediaPool, encode
from bench.workload.spec import WorkloadSpec, load

#: Bumped whenever the same spec and seed would produce different files.
GENERATOR_VERSION = 2

log = logging.getLogger(__name__)

_VOCAB = np.array(("the cache block salt token prefix tenant image audio video frame sample "
                   "model request reply server queue batch layer hidden vector stream bench "
                   "answer question describe listen watch count colour shape sound motion "
                   "left right above below first second quick quiet bright dark").split())


@dataclass
class BuildStats:
    """Timings and totals of one generation (not written: they vary between runs)."""

    requests: int
    seconds: float
    media_seconds: float
    media_bytes: int
    media_files: int


@dataclass
class _Session:
    case: str
    tenant: str
    salt: str | None
    turns: int
    messages: list[dict[str, Any]]
    turn: int = 0


@dataclass
class _Oracle:
    """Digests of every prompt prefix seen so far -> earliest request id."""

    same_salt: dict[bytes, str] = field(default_factory=dict)
    any_salt: dict[bytes, str] = field(default_factory=dict)

    def judge(self, salt: str | None, digests: list[bytes]) -> tuple[str | None, int, str, str]:
        """(prefix_of, shared_messages, expect, why) for a prompt's prefix digests."""
        salted = [_salted(salt, d) for d in digests]
        same = next((i for i in range(len(digests), 0, -1) if salted[i - 1] in self.same_salt), 0)
        other = next((i for i in range(len(digests), 0, -1) if digests[i - 1] in self.any_salt), 0)
        if same:
            expect = "full" if same == len(digests) else "partial"
            what = "identical prompt" if expect == "full" else f"first {same} message(s) shared"
            relation = "both unsalted" if salt is None else "same salt"
            return self.same_salt[salted[same - 1]], same, expect, f"{what}, {relation}"
        if other:
            return (self.any_salt[digests[other - 1]], other, "none",
                    f"{other} message(s) shared, different salt")
        return None, 0, "none", "no shared prefix"

    def record(self, rid: str, salt: str | None, digests: list[bytes]) -> None:
        """Remember a sent prompt's prefixes (the earliest sender wins)."""
        for d in digests:
            self.any_salt.setdefault(d, rid)
            self.same_salt.setdefault(_salted(salt, d), rid)


def _salted(salt: str | None, digest: bytes) -> bytes:
    return hashlib.blake2b(digest, key=b"\0" if salt is None else b"s:" + salt.encode(),
                           digest_size=16).digest()


class _Builder:
    """Turns a spec into request dicts, one at a time."""

    def __init__(self, spec: WorkloadSpec, pool: MediaPool):
        self.spec, self.pool = spec, pool
        self.g = np.random.default_rng([spec.seed, 1])
        self.tag = f"{spec.name}-{spec.sha256[:6]}-s{spec.seed}"
        self.tenants = [f"t{i}" for i in range(spec.tenants)]
        self.salts = {t: {"none": None, "shared": "shared", "tenant": t}[mode]
                      for t, mode in zip(self.tenants, spec.salt_modes)}
        weights = np.array(spec.tenant_weights)
        self.weights = weights / weights.sum()
        self.open: list[_Session] = []
        self.history: deque[dict[str, Any]] = deque(maxlen=spec.repeat_window)
        self.oracle = _Oracle()
        self.cases = 0
        self.system_prompts: dict[str, str] = {}

    def next(self, index: int) -> dict[str, Any]:
        """The request at position ``index`` (without ``arrival_s``)."""
        spec, g = self.spec, self.g
        if self.history and g.random() < spec.repeat_ratio:
            req = self._repeat()
        elif self.open and (len(self.open) >= spec.concurrent_sessions or g.random() < 0.5):
            req = self._advance(self.open[int(g.integers(len(self.open)))])
        else:
            req = self._advance(self._new_session())
        req["id"] = f"r{index:06d}"
        digests = self._digests(req["messages"])
        prefix_of, shared, expect, why = self.oracle.judge(req["salt_ref"], digests)
        self.oracle.record(req["id"], req["salt_ref"], digests)
        req["oracle"] = {"prefix_of": prefix_of, "shared_messages": shared, "expect": expect,
                         "reason": f"{req.pop('_intent')}: {why}"}
        return req

    def _new_session(self) -> _Session:
        tenant = str(self.g.choice(self.tenants, p=self.weights))
        case = f"c{self.cases:05d}"
        self.cases += 1
        lo, hi = self.spec.turns
        session = _Session(case, tenant, self.salts[tenant], int(self.g.integers(lo, hi + 1)),
                           [self._system(case, tenant)])
        if session.turns > 1:
            self.open.append(session)
        return session

    def _advance(self, s: _Session) -> dict[str, Any]:
        spec = self.spec
        if s.turn:
            reply = f"Reply {s.turn - 1}: {self._words(spec.reply_words)}"
            s.messages.append(_message("assistant", [_text(reply)]))
        # The distinguishing id comes first, so that it falls inside the first KV block.
        opener = f"[{s.case} {self.tag}]" if s.turn == 0 else f"[turn {s.turn}]"
        parts = [_text(f"{opener} Question: {self._words(spec.user_words)}")]
        if s.turn == 0 or spec.media_every_turn:
            media = spec.media
            if spec.one_modality and media:
                chosen = list(media)[int(self.g.integers(len(media)))]
                media = {chosen: media[chosen]}
            for modality, ms in media.items():
                lo = max(ms.per_request[0], 1) if spec.one_modality else ms.per_request[0]
                count = int(self.g.integers(lo, max(lo, ms.per_request[1]) + 1))
                parts += [{"type": modality, "media": self.pool.pick(modality, self.g)}
                          for _ in range(count)]
        s.messages.append(_message("user", parts))
        req = self._request(s.case, s.tenant, s.salt, f"s{s.case[1:]}", s.turn, s.messages,
                            "new case" if s.turn == 0 else f"turn {s.turn}")
        s.turn += 1
        if s.turn >= s.turns and s in self.open:
            self.open.remove(s)
        self.history.append(req)
        return req

    def _repeat(self) -> dict[str, Any]:
        g = self.g
        src = self.history[int(g.integers(len(self.history)))]
        tenant, intent = src["tenant"], f"repeat of {src['id']}"
        if len(self.tenants) > 1 and g.random() < self.spec.cross_tenant:
            others = [t for t in self.tenants if t != tenant]
            w = np.array([self.weights[self.tenants.index(t)] for t in others])
            tenant, intent = str(g.choice(others, p=w / w.sum())), f"cross-tenant repeat of {src['id']}"
        messages = src["messages"]
        if src["modalities"] and g.random() < self.spec.variant_repeat:
            messages = copy.deepcopy(messages)
            for part in (p for m in messages for p in m["content"] if "media" in p):
                part["media"] = self.pool.variant_of(part["media"])
            intent = f"re-encoded {intent}"
        return self._request(src["case"], tenant, self.salts[tenant], src["session"],
                             src["turn"], messages, intent)

    def _request(self, case: str, tenant: str, salt: str | None, session: str, turn: int,
                 messages: list[dict[str, Any]], intent: str) -> dict[str, Any]:
        present = {p["type"] for m in messages for p in m["content"]}
        return {"id": "", "case": case, "tenant": tenant, "salt_ref": salt, "session": session,
                "turn": turn, "arrival_s": None, "messages": list(messages),
                "modalities": [m for m in MEDIA_MODALITIES if m in present],
                "max_tokens": self.spec.max_tokens, "oracle": None, "_intent": intent}

    def _system(self, case: str, tenant: str) -> dict[str, Any]:
        scope = self.spec.system_scope
        if scope == "case":
            text = f"[{case} {self.tag}] {self._words(self.spec.system_words)}"
        else:
            key = tenant if scope == "tenant" else "all"
            if key not in self.system_prompts:
                words = self._words(self.spec.system_words)
                self.system_prompts[key] = f"[{key} prefix {self.tag}] {words}"
            text = self.system_prompts[key]
        return _message("system", [_text(text)])

    def _words(self, n: int) -> str:
        return " ".join(_VOCAB[self.g.integers(0, len(_VOCAB), n)])

    def _digests(self, messages: list[dict[str, Any]]) -> list[bytes]:
        """Running digests of the prompt's leading 1, 2, ... messages (media by sha256)."""
        out, h = [], hashlib.sha256()
        for m in messages:
            parts = [p if "media" not in p else {"type": p["type"], "sha": self.pool.sha256[p["media"]]}
                     for p in m["content"]]
            h.update(json.dumps([m["role"], parts], separators=(",", ":")).encode())
            out.append(h.copy().digest()[:16])
        return out


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _message(role: str, content: list[dict[str, str]]) -> dict[str, Any]:
    return {"role": role, "content": content}


def _arrivals(spec: WorkloadSpec):
    """Yield ``arrival_s`` per request: ``None`` or the cumulative arrival time in seconds."""
    g = np.random.default_rng([spec.seed if spec.arrival_seed is None else spec.arrival_seed, 2])
    t = 0.0
    while True:
        if spec.arrival == "none":
            yield None
            continue
        yield round(t, 6)
        if spec.arrival == "constant":
            t += 1.0 / spec.rate
        elif spec.arrival == "poisson":
            t += g.exponential(1.0 / spec.rate)
        else:
            t += g.gamma(spec.gamma_shape, 1.0 / (spec.rate * spec.gamma_shape))


def write_workload(spec: WorkloadSpec, out: Path) -> BuildStats:
    """Generate ``spec`` into the empty or new directory ``out``."""
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    expect, cases = Counter(), set()
    with open(out / manifest.MEDIA_FILE, "w", encoding="utf-8") as media_index, \
            open(out / manifest.REQUESTS_FILE, "w", encoding="utf-8") as requests:
        pool = MediaPool(spec, out, media_index)
        builder = _Builder(spec, pool)
        for index, arrival in zip(range(spec.requests), _arrivals(spec)):
            req = builder.next(index)
            req["arrival_s"] = arrival
            requests.write(manifest.dump(req))
            expect[req["oracle"]["expect"]] += 1
            cases.add(req["case"])
    media_counts = Counter(mid.split("-")[0] for mid in pool.sha256)
    manifest.write_metadata(out, {
        "kind": manifest.KIND, "schema_version": manifest.VERSION,
        "generator": {"name": "saltbench", "version": __version__, "format": GENERATOR_VERSION},
        "spec": {"name": spec.name, "description": spec.description, "file": spec.path.name,
                 "sha256": spec.sha256},
        "seed": spec.seed,
        "counts": {"requests": spec.requests, "cases": len(cases),
                   "media": {m: media_counts[p] for m, p in PREFIX.items()},
                   "media_bytes": pool.bytes, "expect": {k: expect[k] for k in EXPECTATIONS}},
        "tenants": [{"id": t, "salt_ref": builder.salts[t]} for t in builder.tenants],
        "libraries": library_versions(),
    })
    return BuildStats(requests=spec.requests, seconds=time.perf_counter() - start,
                      media_seconds=pool.seconds, media_bytes=pool.bytes,
                      media_files=len(pool.sha256))


def default_dir(spec: WorkloadSpec, requests_overridden: bool) -> Path:
    """``<cache>/workloads/<name>-<spec hash>-s<seed>[-n<requests>]``."""
    suffix = f"-n{spec.requests}" if requests_overridden else ""
    return cache_dir("workloads") / f"{spec.name}-{spec.sha256[:8]}-s{spec.seed}{suffix}"


def generate(spec: str | Path, seed: int | None = None, requests: int | None = None,
             out: str | Path | None = None, force: bool = False) -> Path:
    """Generate a workload (skipped if ``out`` already holds this one, unless ``force``).

    A reused workload's media files are checked against their recorded size and sha256
    and a damaged one is rebuilt. A lock beside ``out`` serialises concurrent callers.
    """
    ws = load(spec)
    if seed is not None:
        ws = replace(ws, seed=seed)
    if requests is not None:
        if requests < 1:
            raise BenchError(f"--requests: must be a positive integer, got {requests}")
        ws = replace(ws, requests=requests)
    target = Path(out) if out is not None else default_dir(ws, requests is not None)
    with locked(target):
        if not force and _is_current(target, ws) and _media_intact(target, ws):
            return target
        if target.exists() and any(target.iterdir()) and not (target / manifest.META_FILE).exists():
            raise BenchError(f"{target}: exists and is not a workload; refusing to overwrite it")
        tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            write_workload(ws, tmp)
            replace_dir(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _is_current(target: Path, ws: WorkloadSpec) -> bool:
    try:
        meta = json.loads((target / manifest.META_FILE).read_text())
    except (OSError, ValueError):
        return False
    return (meta.get("schema_version") == manifest.VERSION
            and meta.get("generator", {}).get("format") == GENERATOR_VERSION
            and meta.get("spec", {}).get("sha256") == ws.sha256
            and meta.get("seed") == ws.seed
            and meta.get("counts", {}).get("requests") == ws.requests)


def _media_intact(target: Path, ws: WorkloadSpec) -> bool:
    """Check every media file of the workload in ``target``, re-encoding a damaged one.

    False when the manifest is unreadable or a re-encoded file still differs (other
    library versions): the whole workload must be generated again.
    """
    try:
        workload = manifest.load_workload(target)
    except BenchError as exc:
        log.warning("%s; generating the workload again", exc)
        return False
    for item in workload.media.values():
        problem = _media_problem(item)
        if problem:
            log.warning("%s: damaged media (%s); rebuilding it", item.path, problem)
            encode(ws, target, item.id)
            if _media_problem(item):
                log.warning("%s: rebuilt file differs from the manifest; generating the "
                            "workload again", item.path)
                return False
    return True


def _media_problem(item: manifest.MediaItem) -> str | None:
    return file_problem(item.path, item.sha256, item.bytes)


def open_workload(spec: str, seed: int | None = None,
                  requests: int | None = None) -> manifest.Workload:
    """A generated workload directory as it is, or a spec generated (or reused) first."""
    path = Path(spec)
    if path.is_dir():
        if seed is not None or requests is not None:
            raise BenchError(f"--spec {spec}: a generated workload; --seed and --requests "
                             "apply to spec files only")
        workload = manifest.load_workload(path)
        damaged = [f"{i.path}: {p}" for i in workload.media.values() if (p := _media_problem(i))]
        if damaged:
            raise BenchError(f"--spec {spec}: damaged media ({len(damaged)}): {damaged[0]}; "
                             "generate the workload again with --force")
        return workload
    return manifest.load_workload(generate(spec, seed=seed, requests=requests))
