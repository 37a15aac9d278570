"""The listening socket of `indexer serve`: accepted connections must not wait on Nagle's algorithm.

uvicorn writes a response as two sends (headers, body). With Nagle on, the body waits for the client's delayed
ACK on a kept-alive connection: +40 ms on every request after the first (measured with bench/api_latency.py).
asyncio turns Nagle off only for sockets whose ``proto`` is TCP, and accepted sockets inherit both."""

from __future__ import annotations

import socket

from indexer.server.run import bind


def test_accepted_connections_have_nagle_off() -> None:
    listener = bind("127.0.0.1", 0)
    try:
        assert listener.proto == socket.IPPROTO_TCP
        client = socket.create_connection(listener.getsockname()[:2])
        accepted, _ = listener.accept()
        try:
            assert accepted.proto == socket.IPPROTO_TCP  # what asyncio checks before setting TCP_NODELAY
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            accepted.close()
            client.close()
    finally:
        listener.close()
