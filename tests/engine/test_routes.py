"""Route discovery against a small stand-in server (no engine)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench.engine.routes import (
    NEEDS_SCALE_OUT,
    NOT_MOUNTED,
    Routes,
    find_routes,
    request_fields,
)
from bench.vocab import GENERATE_ROUTE as GENERATE
from bench.vocab import RENDER_ROUTE as RENDER

#: The shape of vLLM's document: the generate body refers to a component schema.
_BODY = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/GenerateRequest"}}}}
OPENAPI = {"paths": {GENERATE: {"post": {"requestBody": _BODY}}, RENDER: {"post": {}}},
           "components": {"schemas": {"GenerateRequest": {"properties": {
               "token_ids": {}, "features": {}, "content_parts": {}}}}}}


def _serve(openapi: dict | None, statuses: dict[str, int]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/openapi.json" and openapi is not None:
                self._answer(200, openapi)
            else:
                self._answer(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._answer(statuses.get(self.path, 404), {"detail": "probe"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def stand_in(request: pytest.FixtureRequest) -> Iterator[str]:
    openapi, statuses = request.param
    server = _serve(openapi, statuses)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("stand_in", [(OPENAPI, {})], indirect=True)
def test_routes_listed_in_openapi_are_available(stand_in: str) -> None:
    assert find_routes(stand_in, {}) == Routes(frozenset({GENERATE, RENDER}), {},
                                           frozenset({"token_ids", "features", "content_parts"}))


def test_request_fields_without_a_schema_are_unknown() -> None:
    assert request_fields({"paths": {GENERATE: {"post": {}}}}, GENERATE) == frozenset()
    inline = {"paths": {GENERATE: {"post": {"requestBody": {"content": {"application/json": {
        "schema": {"properties": {"token_ids": {}}}}}}}}}}
    assert request_fields(inline, GENERATE) == {"token_ids"}


@pytest.mark.parametrize("stand_in", [({"paths": {}}, {GENERATE: 403, RENDER: 403})], indirect=True)
def test_disabled_routes_need_scale_out(stand_in: str) -> None:
    assert find_routes(stand_in, {}) == Routes(unavailable={GENERATE: NEEDS_SCALE_OUT,
                                                        RENDER: NEEDS_SCALE_OUT})


@pytest.mark.parametrize("stand_in", [(None, {GENERATE: 422})], indirect=True)
def test_without_openapi_a_probe_decides(stand_in: str) -> None:
    assert find_routes(stand_in, {}) == Routes(frozenset({GENERATE}), {RENDER: NOT_MOUNTED})


@pytest.mark.parametrize("stand_in", [({"paths": {RENDER: {}}}, {GENERATE: 500})], indirect=True)
def test_other_answers_are_reported_as_they_are(stand_in: str) -> None:
    assert find_routes(stand_in, {}) == Routes(frozenset({RENDER}), {GENERATE: "HTTP 500"})


def test_unreachable_server_gives_reasons() -> None:
    routes = find_routes("http://127.0.0.1:9", {})
    assert not routes.available and not routes.generate_fields
    assert all(r.startswith("no answer") for r in routes.unavailable.values())
