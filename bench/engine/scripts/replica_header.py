"""ASGI middleware for a vLLM replica: every response names the server that made it.

Runs inside the engine environment (``vllm serve --middleware replica_header.ReplicaHeader``
with this folder on ``PYTHONPATH``). It adds ``x-saltbench-replica: HOST:PORT`` (the
address the replica listens on) to each HTTP response, so that a request sent through a
router can be attributed to the replica that served it; a router that passes the
replica's headers on (vllm-router does) needs no change. Nothing else is touched.
"""

HEADER = b"x-saltbench-replica"


class ReplicaHeader:
    """Pure ASGI middleware (no buffering: streamed responses stay streamed)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope.get("server"):
            return await self.app(scope, receive, send)
        host, port = scope["server"][:2]
        value = f"{host}:{port}".encode()

        async def named_send(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (HEADER, value)]}
            await send(message)

        return await self.app(scope, receive, named_send)
