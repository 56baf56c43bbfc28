"""Workload spec files (TOML): dataclasses and strict validation.

Tables and keys (ranges are ``n`` or ``[min, max]``, drawn per item):

- ``[workload]`` name (file stem), description, requests (required), seed, max_tokens,
  one_modality (each new case draws media of ONE configured modality, at least one item)
- ``[tenants]`` count, salt (``none``/``shared``/``tenant``, or one per tenant), weights
- ``[text]`` system_scope (``case``/``tenant``/``global``: who shares the system prompt),
  system_words, user_words
- ``[sessions]`` turns (range), concurrent (open sessions), reply_words, media_every_turn
- ``[repeats]`` ratio (repeat an earlier request), cross_tenant (sent by another tenant),
  variant (with its media re-encoded), window (how far back repeats look)
- ``[arrival]`` process (``none``/``constant``/``poisson``/``gamma``), rate (req/s), shape, seed
- ``[media.image|audio|video]`` pool, per_request (range), reuse (slot draws from the pool,
  else fresh media), variants (a reused slot takes the re-encoded copy), kinds, and
  image: width, height, formats, jpeg_quality; audio: sample_rate, channels, duration_s,
  subtype; video: width, height (even), fps, crf, frames or duration_s

Every error is a :class:`BenchError` naming the file and the key path, e.g.
``datasets/image.toml: [media.image].width: must be a positive integer, got -3``.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.media import audio, image, video
from bench.vocab import MEDIA_MODALITIES, SALT_SCOPES

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

#: Where named specs live (``generate smoke`` means ``datasets/smoke.toml``).
DATASETS_DIR = Path(__file__).resolve().parents[2] / "datasets"
SYSTEM_SCOPES = ("case", "tenant", "global")
ARRIVALS = ("none", "constant", "poisson", "gamma")

IntRange = tuple[int, int]
FloatRange = tuple[float, float]


@dataclass(frozen=True)
class MediaSpec:
    """One modality's pool and per-request use; ``params`` holds the modality's encoder settings."""

    modality: str
    pool: int
    per_request: IntRange
    reuse: float
    variants: float
    kinds: tuple[str, ...]
    params: dict[str, Any]


@dataclass(frozen=True)
class WorkloadSpec:
    """A validated spec file."""

    path: Path
    sha256: str
    name: str
    description: str
    requests: int
    seed: int
    max_tokens: int
    one_modality: bool
    tenants: int
    salt_modes: tuple[str, ...]
    tenant_weights: tuple[float, ...]
    system_scope: str
    system_words: int
    user_words: int
    turns: IntRange
    concurrent_sessions: int
    reply_words: int
    media_every_turn: bool
    repeat_ratio: float
    cross_tenant: float
    variant_repeat: float
    repeat_window: int
    arrival: str
    rate: float
    gamma_shape: float
    arrival_seed: int | None  # None: follow ``seed``
    media: dict[str, MediaSpec]


class _Table:
    """Typed access to one TOML table; reports errors as ``file: [table].key: ...``."""

    def __init__(self, file: Path, name: str, data: Any):
        self.file, self.name = file, name
        if not isinstance(data, dict):
            raise BenchError(f"{file}: [{name}]: must be a table, got {_kind(data)}")
        self.data = dict(data)
        self.asked: list[str] = []

    def fail(self, key: str, message: str, value: Any) -> BenchError:
        return BenchError(f"{self.file}: [{self.name}].{key}: {message}, got {value!r}")

    def get(self, key: str, default: Any, check: Callable[[Any], bool], message: str) -> Any:
        self.asked.append(key)
        if key not in self.data:
            if default is _REQUIRED:
                typo = difflib.get_close_matches(key, list(self.data), n=1)
                hint = f" (is {typo[0]!r} a misspelling of it?)" if typo else ""
                raise BenchError(f"{self.file}: [{self.name}].{key}: is required{hint}")
            return default
        value = self.data.pop(key)
        if not check(value):
            raise self.fail(key, message, value)
        return value

    def int(self, key: str, default: Any = None, *, minimum: int = 1) -> int:
        message = _INT_MESSAGE.get(minimum, f"must be an integer >= {minimum}")
        return self.get(key, default, lambda v: _is_int(v) and v >= minimum, message)

    def number(self, key: str, default: Any = None, *, lo: float = 0.0, hi: float | None = None,
               open_lo: bool = False) -> float | None:
        def ok(v: Any) -> bool:
            return (_is_num(v) and (v > lo if open_lo else v >= lo)
                    and (hi is None or v <= hi))
        span = f"in [{lo}, {hi}]" if hi is not None else (f"> {lo}" if open_lo else f">= {lo}")
        value = self.get(key, default, ok, f"must be a number {span}")
        return None if value is None else float(value)

    def fraction(self, key: str, default: float = 0.0) -> float:
        return self.number(key, default, lo=0.0, hi=1.0)

    def choice(self, key: str, options: tuple[str, ...], default: Any = None) -> str:
        return self.get(key, default, lambda v: v in options, f"must be one of {list(options)}")

    def choices(self, key: str, options: tuple[str, ...], default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.get(key, default, lambda v: isinstance(v, (list, tuple)) and len(v) > 0
                         and all(x in options for x in v),
                         f"must be a non-empty list of {list(options)}")
        return tuple(value)

    def int_range(self, key: str, default: Any, *, minimum: int = 1) -> IntRange:
        value = self.get(key, default, lambda v: _is_int(v) or (
            isinstance(v, (list, tuple)) and len(v) == 2 and all(_is_int(x) for x in v)),
            "must be an integer or a [min, max] pair of integers")
        if _is_int(value):
            if value < minimum:
                raise self.fail(key, _INT_MESSAGE.get(minimum, f"must be an integer >= {minimum}"),
                                value)
            return int(value), int(value)
        lo, hi = value
        if lo < minimum or hi < lo:
            raise self.fail(key, f"must be integers >= {minimum} with min <= max", value)
        return int(lo), int(hi)

    def float_range(self, key: str, default: Any) -> FloatRange:
        value = self.get(key, default, lambda v: _is_num(v) or (
            isinstance(v, (list, tuple)) and len(v) == 2 and all(_is_num(x) for x in v)),
            "must be a number or a [min, max] pair of numbers")
        lo, hi = (value, value) if _is_num(value) else value
        if lo <= 0 or hi < lo:
            raise self.fail(key, "must be numbers > 0 with min <= max", value)
        return float(lo), float(hi)

    def str(self, key: str, default: Any = None) -> str:
        return self.get(key, default, lambda v: isinstance(v, str), "must be a string")

    def bool(self, key: str, default: bool) -> bool:
        return self.get(key, default, lambda v: isinstance(v, bool), "must be true or false")

    def done(self) -> None:
        """Reject whatever key nobody asked for."""
        if self.data:
            key = sorted(self.data)[0]
            close = difflib.get_close_matches(key, self.asked, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else \
                f"; known: {', '.join(sorted(self.asked))}"
            raise BenchError(f"{self.file}: [{self.name}].{key}: unknown key{hint}")


_REQUIRED = object()
_INT_MESSAGE = {0: "must be a non-negative integer", 1: "must be a positive integer"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(v: Any) -> str:
    return type(v).__name__


def resolve(spec: str | Path) -> Path:
    """A spec path, or a name of a file in :data:`DATASETS_DIR` (``smoke`` -> ``datasets/smoke.toml``)."""
    path = Path(spec)
    if path.is_file():
        return path
    named = DATASETS_DIR / f"{spec}.toml"
    if named.is_file():
        return named
    known = sorted(p.stem for p in DATASETS_DIR.glob("*.toml"))
    raise BenchError(f"spec {str(spec)!r}: no such file, nor a dataset name (known: {', '.join(known)})")


def load(spec: str | Path) -> WorkloadSpec:
    """Read and validate a spec file given by path or dataset name."""
    path = resolve(spec)
    raw = path.read_bytes()
    try:
        doc = tomllib.loads(raw.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BenchError(f"{path}: not valid TOML: {exc}") from None
    return parse(doc, path, hashlib.sha256(raw).hexdigest())


def parse(doc: dict[str, Any], path: Path, sha256: str = "") -> WorkloadSpec:
    """Validate a decoded spec document (``path`` only names the file in errors)."""
    top = dict(doc)
    table = lambda name: _Table(path, name, top.pop(name, {}))  # noqa: E731

    wl = table("workload")
    name = wl.str("name", path.stem)
    description = wl.str("description", "")
    requests = wl.int("requests", _REQUIRED)
    seed = wl.int("seed", 0, minimum=0)
    max_tokens = wl.int("max_tokens", 8)
    one_modality = wl.bool("one_modality", False)
    wl.done()

    ten = table("tenants")
    count = ten.int("count", 1)
    salt = ten.get("salt", "none", lambda v: v in SALT_SCOPES or (
        isinstance(v, list) and len(v) == count and all(x in SALT_SCOPES for x in v)),
        f"must be one of {list(SALT_SCOPES)} or a list of them, one per tenant")
    weights = ten.get("weights", [1.0] * count, lambda v: isinstance(v, list) and len(v) == count
                      and all(_is_num(x) and x > 0 for x in v),
                      "must be a list of positive numbers, one per tenant")
    ten.done()

    text = table("text")
    system_scope = text.choice("system_scope", SYSTEM_SCOPES, "case")
    system_words = text.int("system_words", 24, minimum=0)
    if system_scope != "case" and system_words < 32:
        raise text.fail("system_words", "must be >= 32 when the system prompt is shared, so the "
                        "shared prefix fills a KV block", system_words)
    user_words = text.int("user_words", 12, minimum=0)
    text.done()

    ses = table("sessions")
    turns = ses.int_range("turns", 1)
    concurrent = ses.int("concurrent", 4)
    reply_words = ses.int("reply_words", 12, minimum=0)
    media_every_turn = ses.bool("media_every_turn", False)
    ses.done()

    rep = table("repeats")
    repeat_ratio = rep.fraction("ratio")
    cross_tenant = rep.fraction("cross_tenant")
    variant_repeat = rep.fraction("variant")
    window = rep.int("window", 256)
    rep.done()

    arr = table("arrival")
    process = arr.choice("process", ARRIVALS, "none")
    rate = arr.number("rate", None if process != "none" else 1.0, lo=0.0, open_lo=True)
    if process != "none" and rate is None:
        raise BenchError(f"{path}: [arrival].rate: is required for process {process!r}")
    shape = arr.number("shape", 2.0, lo=0.0, open_lo=True)
    arrival_seed = arr.int("seed", None, minimum=0)
    arr.done()

    media_doc = _Table(path, "media", top.pop("media", {}))
    media = {m: _media(path, m, media_doc.data.pop(m)) for m in MEDIA_MODALITIES if m in media_doc.data}
    media_doc.done()

    if top:
        raise BenchError(f"{path}: [{sorted(top)[0]}]: unknown table")
    return WorkloadSpec(
        path=path, sha256=sha256, name=name, description=description, requests=requests,
        seed=seed, max_tokens=max_tokens, one_modality=one_modality, tenants=count,
        salt_modes=tuple(salt) if isinstance(salt, list) else (salt,) * count,
        tenant_weights=tuple(float(w) for w in weights), system_scope=system_scope,
        system_words=system_words, user_words=user_words, turns=turns,
        concurrent_sessions=concurrent, reply_words=reply_words,
        media_every_turn=media_every_turn, repeat_ratio=repeat_ratio, cross_tenant=cross_tenant,
        variant_repeat=variant_repeat, repeat_window=window, arrival=process, rate=rate,
        gamma_shape=shape, arrival_seed=arrival_seed, media=media)


def _media(path: Path, modality: str, data: Any) -> MediaSpec:
    t = _Table(path, f"media.{modality}", data)
    pool = t.int("pool", 4)
    per_request = t.int_range("per_request", 1, minimum=0)
    reuse = t.fraction("reuse", 1.0)
    variants = t.fraction("variants", 0.0)
    kinds_all = {"image": image.KINDS, "audio": audio.KINDS, "video": video.KINDS}[modality]
    kinds = t.choices("kinds", kinds_all, kinds_all)
    if modality == "image":
        params = {"width": t.int_range("width", [64, 224]), "height": t.int_range("height", [64, 224]),
                  "formats": t.choices("formats", tuple(image.FORMATS), ("png", "jpeg")),
                  "jpeg_quality": t.get("jpeg_quality", 90, lambda v: _is_int(v) and 1 <= v <= 95,
                                        "must be an integer in [1, 95]")}
    elif modality == "audio":
        params = {"sample_rate": t.get("sample_rate", 16000, lambda v: _is_int(v) and 1000 <= v <= 192000,
                                       "must be an integer in [1000, 192000]"),
                  "channels": t.get("channels", 1, lambda v: _is_int(v) and 1 <= v <= 8,
                                    "must be an integer in [1, 8]"),
                  "duration_s": t.float_range("duration_s", 1.0),
                  "subtype": t.choice("subtype", audio.SUBTYPES, "PCM_16")}
    else:
        params = {"width": _even_range(t, "width"), "height": _even_range(t, "height"),
                  "fps": t.get("fps", 8, lambda v: _is_int(v) and 1 <= v <= 120,
                               "must be an integer in [1, 120]"),
                  "crf": t.get("crf", 23, lambda v: _is_int(v) and 0 <= v <= 45,
                               "must be an integer in [0, 45]")}
        if "frames" in t.data and "duration_s" in t.data:
            raise BenchError(f"{path}: [media.video].frames: give frames or duration_s, not both")
        if "duration_s" in t.data:
            lo, hi = t.float_range("duration_s", None)
            params["frames"] = (max(1, round(lo * params["fps"])), max(1, round(hi * params["fps"])))
        else:
            params["frames"] = t.int_range("frames", 8)
    t.done()
    return MediaSpec(modality, pool, per_request, reuse, variants, kinds, params)


def _even_range(t: _Table, key: str) -> IntRange:
    lo, hi = t.int_range(key, [64, 128], minimum=16)
    if lo % 2 or hi % 2:
        raise t.fail(key, "must be even numbers (H.264 4:2:0)", [lo, hi])
    return lo, hi
