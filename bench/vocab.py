"""One definition per word: modalities, salt modes, phases, expectations and verdicts.

Every other module imports these names instead of spelling the strings again.
"""

from __future__ import annotations

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

#: Phases of a pass: ``warmup`` (excluded), ``prime`` (optional), ``measure``.
PHASES = ("warmup", "prime", "measure")
MEASURE = "measure"

#: What the prefix cache should return: the full prefix, part of it, or nothing.
FULL, PARTIAL, NONE = "full", "partial", "none"
EXPECTATIONS = (FULL, PARTIAL, NONE)
#: A request whose expectation cannot be stated exactly.
UNJUDGED = "unjudged"

#: Isolation verdicts, most severe first, with their colour (Okabe-Ito) and hatch.
ISOLATED, LEAK, UNDER_HIT, ERROR = "ISOLATED", "LEAK", "UNDER-HIT", "ERROR"
VERDICT_STYLE = {  # verdict: (colour, hatch, ink on it)
    ISOLATED: ("#009E73", "", "black"),
    LEAK: ("#D55E00", "xx", "white"),
    UNDER_HIT: ("#F0E442", "..", "black"),
    ERROR: ("#555555", "//", "white"),
}
