"""A port whose last server stopped (connections in TIME_WAIT) is free again (no engine)."""

from __future__ import annotations

import socket
import time

import pytest

from bench.engine.server import check_port_free
from bench.errors import BenchError


def test_port_of_a_stopped_server_is_free() -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = listener.accept()
    conn.close()  # the server closes first: its side waits in TIME_WAIT
    listener.close()
    time.sleep(0.1)
    client.close()
    check_port_free(port)


def test_listening_port_is_taken() -> None:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(BenchError, match="already in use"):
            check_port_free(sock.getsockname()[1])
