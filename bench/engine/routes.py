"""Which of the suite's optional routes a running server serves, found by asking it.

``GET /openapi.json`` lists mounted routes. A route missing there is probed with an
empty POST body: a validation error (400/422) means it is served; 404 that it is not
mounted; 403 that it is mounted but disabled (vLLM lists disabled routes nowhere and
answers 403 until it is started with ``--enable-scale-out``). The same document names
the request fields of ``/inference/v1/generate``: releases without ``content_parts``
silently ignore it (the media are then left out).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from bench.vocab import GENERATE_ROUTE, RENDER_ROUTE

#: Routes the suite uses beside chat completions; each may be missing on a server.
ROUTES = (GENERATE_ROUTE, RENDER_ROUTE)

NOT_MOUNTED = "404 not mounted"
NEEDS_SCALE_OUT = "403 disabled (needs --enable-scale-out)"
_REASONS = {404: NOT_MOUNTED, 403: NEEDS_SCALE_OUT}
#: Answers to an empty body that show the route is served.
_SERVED = (200, 400, 422)


@dataclass(frozen=True)
class Routes:
    """What :func:`find_routes` found out."""

    available: frozenset[str] = frozenset()
    unavailable: dict[str, str] = field(default_factory=dict)  # route -> reason
    #: Top-level fields of a generate request body (empty when the server does not say).
    generate_fields: frozenset[str] = frozenset()


def _openapi(base_url: str, headers: dict[str, str]) -> dict | None:
    request = urllib.request.Request(f"{base_url}/openapi.json", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            doc = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("paths"), dict) else None


def request_fields(doc: dict, route: str) -> frozenset[str]:
    """The properties of ``route``'s JSON request body schema (one ``$ref`` resolved)."""
    try:
        schema = doc["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]
        ref = schema.get("$ref", "")
        if ref.startswith("#/components/schemas/"):
            schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
        return frozenset(schema["properties"])
    except (KeyError, TypeError, AttributeError):
        return frozenset()


def probe_status(base_url: str, route: str, headers: dict[str, str]) -> int | str:
    """The HTTP status of an empty POST to ``route``, or why there is none."""
    request = urllib.request.Request(f"{base_url}{route}", data=b"{}",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError) as exc:
        return f"no answer ({exc})"


def find_routes(base_url: str, headers: dict[str, str]) -> Routes:
    """The routes of :data:`ROUTES` the server serves, and why each other one is not
    (``headers`` carry the API key)."""
    doc = _openapi(base_url, headers)
    paths = doc["paths"] if doc else {}
    available, unavailable = set(), {}
    for route in ROUTES:
        if route in paths:
            available.add(route)
            continue
        status = probe_status(base_url, route, headers)
        if status in _SERVED:
            available.add(route)
        elif isinstance(status, int):
            unavailable[route] = _REASONS.get(status, f"HTTP {status}")
        else:
            unavailable[route] = status
    return Routes(frozenset(available), unavailable,
                  request_fields(doc, GENERATE_ROUTE) if doc else frozenset())
