"""One definition per word: modalities, salt modes, phases, expectations and verdicts.

Every other module imports these names instead of spelling the strings again.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Media a request can carry, in reading order.
MEDIA_MODALITIES = ("image", "audio", "video")
#: What an isolation cell probes: text alone or text with one media item.
MODALITIES = ("text", *MEDIA_MODALITIES)
#: A request's modality label: ``text``, its one media modality, or ``mixed``.
MIXED = "mixed"
MODALITY_LABELS = (*MODALITIES, MIXED)

#: How a pass sends salts: ``none`` sends no ``cache_salt``; ``salted`` sends each
#: request's salt (derived from its salt reference, the tenant's or a shared one).
SALT_MODES = ("none", "salted")
#: Which requests of a workload share a salt reference (a spec's ``[tenants].salt``).
SALT_SCOPES = ("none", "shared", "tenant")

#: How the client sends media uuids in the uuid probe and the side channel: as the tenant
#: gave them (the probe's shared uuid; none in the side channel), or ``per-tenant``: every
#: item's uuid namespaced by its tenant (a digest of the salt), as a gateway would to keep
#: vLLM's media caches from being shared across tenants (bench.isolation.probe.tenant_uuid).
CLIENT_UUIDS = ("as-sent", "per-tenant")
PER_TENANT = "per-tenant"

#: Phases of a pass: ``warmup`` (excluded), ``prime`` (optional), ``measure``.
PHASES = ("warmup", "prime", "measure")
MEASURE = "measure"

#: What the prefix cache should return: the full prefix, part of it, or nothing.
FULL, PARTIAL, NONE = "full", "partial", "none"
EXPECTATIONS = (FULL, PARTIAL, NONE)


class Judged:
    """A request's judgement against the prefix-cache model's bounds (bench.verdicts)."""

    MET = "met"  # the bounds agree and it got them
    LEAK = "leak"  # more cached tokens than any allowed source gives
    UNDER_HIT = "under-hit"  # fewer than completed sources guarantee
    UNJUDGED = "unjudged"  # between the bounds: a source in flight, of unknown layout, or output
    FAILED = "failed"  # the request failed
    NO_LAYOUT = "no-layout"  # its layout is unknown (render failed or differs, interrupted)


#: Judgements in report order; the first three are exact ("judged").
JUDGEMENTS = (Judged.MET, Judged.LEAK, Judged.UNDER_HIT, Judged.UNJUDGED, Judged.FAILED,
              Judged.NO_LAYOUT)

class Failure:
    """Why a request failed: a record's ``failure`` (its ``error`` says it in words)."""

    CONNECT = "connect"  # connection refused, unknown host, invalid URL
    TIMEOUT_CONNECT = "timeout-connect"  # no connection within --connect-timeout
    TIMEOUT_FIRST_BYTE = "timeout-first-byte"  # no response byte within --first-byte-timeout
    TIMEOUT_TOTAL = "timeout-total"  # not finished within --timeout
    DEADLINE = "deadline"  # cut off by the run deadline
    RESET = "reset"  # connection reset or closed before the response ended
    HTTP_4XX = "http-4xx"  # a 4xx status (vLLM's message in the error)
    HTTP_5XX = "http-5xx"  # a 5xx status
    ERROR_EVENT = "error-event"  # an SSE error event in a 200 stream
    MALFORMED = "malformed"  # bad JSON, an event that is no object, an unexpected reply
    NO_DONE = "no-done"  # the stream ended without [DONE]: truncated
    NO_TOKEN = "no-token"  # [DONE] before any token event
    NO_USAGE = "no-usage"  # the usage lacks prompt_tokens_details.cached_tokens
    BUILD = "build"  # the request could not be built
    NOT_SENT = "not-sent"  # never sent: the server was gone or the deadline had passed
    LOST = "lost"  # its sender (a Ray actor) was lost with its node: outcome unknown


#: Failure kinds in report order.
FAILURES = (Failure.CONNECT, Failure.TIMEOUT_CONNECT, Failure.TIMEOUT_FIRST_BYTE,
            Failure.TIMEOUT_TOTAL, Failure.DEADLINE, Failure.RESET, Failure.HTTP_4XX,
            Failure.HTTP_5XX, Failure.ERROR_EVENT, Failure.MALFORMED, Failure.NO_DONE,
            Failure.NO_TOKEN, Failure.NO_USAGE, Failure.BUILD, Failure.NOT_SENT, Failure.LOST)

#: A path, cell, group or metric that a server (or one side of a comparison) cannot serve.
NOT_AVAILABLE = "n/a"

#: Isolation verdicts, with their colour (Okabe-Ito) and hatch.
ISOLATED, LEAK, UNDER_HIT, ERROR = "ISOLATED", "LEAK", "UNDER-HIT", "ERROR"
#: The one precedence of isolation verdicts, most severe first: within a cell, a probe
#: and across a run (bench.verdicts.isolation.worst).
VERDICTS = (LEAK, ERROR, UNDER_HIT, ISOLATED)

#: The channels of the tenant boundary judged per path x modality (bench.verdicts.boundary):
#: the prefix (KV) cache; media content, where the media caches give one tenant's processed
#: media to another (a client uuid replaces the content hash); and timing, where a tenant's
#: TTFT tells whether another tenant recently sent the same media.
KV, CONTENT, TIMING = "kv-cache", "media-content", "timing"
CHANNELS = (KV, CONTENT, TIMING)
#: The channels whose finding fails a run by default; timing is reported as exposed.
DEFAULT_FAIL_ON = (KV, CONTENT)
#: Content and timing verdicts: another tenant's media was used for mine; TTFT tells them
#: apart (Holm-adjusted); no evidence at a power that would have seen the target AUC; no
#: evidence, but too few samples to have seen it.
SUBSTITUTED, EXPOSED = "SUBSTITUTED", "EXPOSED"
NOT_DETECTED, UNDERPOWERED = "NOT DETECTED", "UNDERPOWERED"
#: A channel the path and modality can carry that this run did not probe (e.g. the uuid
#: probe or side channel was skipped): unjudged, so it fails a policy that gates it.
NOT_PROBED = "NOT PROBED"
#: Each channel's verdicts, most severe first (its own precedence, as :data:`VERDICTS`).
CHANNEL_VERDICTS = {KV: VERDICTS, CONTENT: (SUBSTITUTED, ERROR, NOT_PROBED, ISOLATED),
                    TIMING: (EXPOSED, ERROR, NOT_PROBED, UNDERPOWERED, NOT_DETECTED)}
VERDICT_STYLE = {  # verdict: (colour, hatch, ink on it)
    ISOLATED: ("#009E73", "", "black"),
    LEAK: ("#D55E00", "xx", "white"),
    SUBSTITUTED: ("#CC79A7", "xx", "white"),
    EXPOSED: ("#E69F00", "\\\\", "black"),
    UNDER_HIT: ("#F0E442", "..", "black"),
    UNDERPOWERED: ("#F0E442", "..", "black"),
    NOT_DETECTED: ("#56B4E9", "", "black"),
    ERROR: ("#555555", "//", "white"),
    NOT_PROBED: ("#BBBBBB", "//", "black"),
    NOT_AVAILABLE: ("#DDDDDD", "", "black"),
}

#: What a comparison says of one metric (bench.compare): it got better or worse beyond
#: its threshold with an interval that excludes no change, neither, or it cannot tell.
IMPROVED, REGRESSED = "improved", "regressed"
NO_CHANGE, INCONCLUSIVE = "no significant change", "inconclusive"
COMPARE_STATES = (REGRESSED, IMPROVED, NO_CHANGE, INCONCLUSIVE, NOT_AVAILABLE)
COMPARE_STYLE = {  # state: colour (Okabe-Ito), as VERDICT_STYLE
    REGRESSED: "#D55E00", IMPROVED: "#0072B2", NO_CHANGE: "#999999",
    INCONCLUSIVE: "#E69F00", NOT_AVAILABLE: "#DDDDDD",
}

#: The server routes the request paths use; the last two are missing or fenced on some versions.
CHAT_ROUTE = "/v1/chat/completions"
GENERATE_ROUTE = "/inference/v1/generate"
RENDER_ROUTE = "/v1/chat/completions/render"

#: Exit codes of a check: passed, a problem found, could not judge (or bad input).
EXIT_OK, EXIT_FOUND, EXIT_CANNOT_JUDGE = 0, 1, 2


def worst_exit(codes: Iterable[int]) -> int:
    """One exit code for several checks: a problem found outranks one that could not be
    judged, which outranks a pass (a leak with a failed step elsewhere exits 1, as
    within an isolation run)."""
    codes = set(codes)
    return EXIT_FOUND if EXIT_FOUND in codes else max(codes, default=EXIT_OK)
