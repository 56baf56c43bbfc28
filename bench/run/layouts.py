"""Each request's prompt as the engine hashes it, from the server's own renderer.

Rendered after the pass that sent it, outside every timed window: the render runs the
multimodal processor (whose cache is keyed by media content, not salt), so rendering
before the pass would warm what the measured requests must find cold. After the pass the
same media have been sent already, and the render never touches the prefix cache.
"""

from __future__ import annotations

import aiohttp

from bench.measured.records import LayoutLine
from bench.paths.base import RequestPath, openai_messages, render, text_only
from bench.verdicts.prefix_model import MediaSpan, layout

#: Renders in flight at once (they are cheap next to a pass, and outside its window).
CONCURRENCY = 4


async def render_layout(session: aiohttp.ClientSession, path: RequestPath,
                        messages: list[dict], block_size: int) -> LayoutLine:
    """The layout of ``messages`` as ``path`` sends them (no salt: it keys block 0 only)."""
    ctx = path.ctx
    sent = text_only(messages) if path.text_only else messages
    rendered = await render(session, ctx, openai_messages(sent, ctx))
    features = rendered.get("features") or {}
    places = features.get("mm_placeholders") or {}
    spans = [MediaSpan(p["offset"], p["length"], identity)
             for modality, hashes in (features.get("mm_hashes") or {}).items()
             for identity, p in zip(hashes, places.get(modality, []))]
    shape = layout(rendered["token_ids"], spans, block_size)
    return LayoutLine(n_tokens=shape.n_tokens, block_keys=list(shape.block_keys))


async def layout_or_error(session: aiohttp.ClientSession, path: RequestPath,
                          messages: list[dict], block_size: int) -> LayoutLine:
    """:func:`render_layout`, or a line whose ``error`` says why the render failed (that
    request is then not judged)."""
    try:
        return await render_layout(session, path, messages, block_size)
    except Exception as exc:  # noqa: BLE001 - that request is not judged, and says why
        return LayoutLine(error=f"{type(exc).__name__}: {exc}"[:300])
