"""The CLI's one-request HTTP client (indexer.server.client): what it parses, and that anything else means
"no server" (the search then runs in-process) rather than an error."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from indexer.server import announce
from indexer.server.client import _address, _dechunk, _parse_response, post_search


def test_parse_and_dechunk() -> None:
    status, headers, body = _parse_response(b'HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n\r\n{"a": 1}')
    assert (status, headers["content-type"], body) == (404, "application/json", b'{"a": 1}')
    assert _dechunk(b"4\r\nWiki\r\n6;ext=1\r\npedia \r\n0\r\n\r\n") == b"Wikipedia "
    assert _address("http://127.0.0.1:8480") == ("127.0.0.1", 8480)
    assert _address("http://[::1]:9/x") == ("[::1]", 9)
    with pytest.raises(ValueError):
        _parse_response(b"SSH-2.0-OpenSSH\r\n")
    with pytest.raises(ValueError):
        _address("https://example.org:443")


def _one_shot_server(reply: bytes) -> tuple[int, list[bytes]]:
    """A loopback server answering one connection with ``reply``; returns its port and what it received."""
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = int(next(line.split(b":")[1] for line in lines if line.lower().startswith(b"content-length")))
            while len(body) < length:
                body += conn.recv(65536)
            got.append(head + b"\r\n\r\n" + body)
            conn.sendall(reply)
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], got


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b'HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{"hits":[]}', (200, {"hits": []})),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nb\r\n{\"hits\":[]}\r\n0\r\n\r\n", (200, {"hits": []})),
        (b"HTTP/1.1 500 Internal Server Error\r\n\r\noops", (500, "oops")),
        (b"garbage", None),
    ],
)
def test_post_search_against_a_real_socket(tmp_path, reply, expected) -> None:
    port, got = _one_shot_server(reply)
    ann = announce.Announcement(f"http://127.0.0.1:{port}", os.getpid(), "tok", time.time(), str(tmp_path))
    announce.write(tmp_path, ann)
    assert post_search(tmp_path, {"query": "q", "k": None}) == expected
    request = got[0].decode()
    assert request.startswith("POST /search HTTP/1.1\r\n") and "Authorization: Bearer tok\r\n" in request
    assert json.loads(request.partition("\r\n\r\n")[2]) == {"query": "q"}  # None values are not sent
