"""A signal always stops the command, also when it lands inside a protocol callback
(where uvloop would swallow the interrupt and httptools turn it into a parser error)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from bench import aio, cli


class _SignalsItself(asyncio.Protocol):
    def data_received(self, data: bytes) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        total = 0
        for i in range(10_000):  # the handler runs here, inside the callback
            total += i


async def _serve_and_wait() -> None:
    server = await asyncio.start_server(lambda r, w: w.write(b"x"), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    await asyncio.get_running_loop().create_connection(_SignalsItself, "127.0.0.1", port)
    await asyncio.sleep(5)


@pytest.mark.parametrize("run", [asyncio.run, aio.run], ids=["asyncio", "default-loop"])
def test_a_signal_inside_a_protocol_callback_stops_the_loop(run) -> None:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    cli.install_signal_handlers()
    try:
        with pytest.raises(KeyboardInterrupt):
            run(_serve_and_wait())
        assert cli._stopped_by == [signal.SIGINT]
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
        cli._stopped_by.clear()
