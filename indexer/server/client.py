"""The CLI's side of a running server: send a search to the server that serves this data directory.

``indexer search`` against a running server should answer in well under 150 ms, process start included, so this
module imports almost nothing: one HTTP/1.1 request over a loopback socket (``Connection: close``, read to the
end), not ``http.client``, whose imports (``email``, ``ssl``) alone cost ~25 ms. It talks only to our own
server; an answer it cannot parse counts as "no server" and the search runs in-process.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from indexer.errors import IndexerError, InputError, NotFoundError
from indexer.server import announce

TIMEOUT_S = 120.0


def remote_search(data_dir: Path | str, body: dict[str, Any]) -> dict[str, Any] | None:
    """POST /search to the announced server; None when no server serves ``data_dir`` (or it is not answering).

    Errors the server answers with (bad input, unknown collection) are raised as IndexerError with its message.
    """
    answer = post_search(data_dir, body)
    if answer is None:
        return None
    status, payload = answer
    if status == 200:
        return payload
    message = str(payload.get("error", {}).get("message", payload)) if isinstance(payload, dict) else str(payload)
    if status == 404:
        raise NotFoundError(message)
    if status in (400, 422):
        raise InputError(message)
    raise IndexerError(f"the server serving {data_dir} answered {status}: {message}")


def post_search(data_dir: Path | str, body: dict[str, Any]) -> tuple[int, Any] | None:
    """(HTTP status, decoded answer) of POST /search to the announced server; None when none answers."""
    ann = announce.read(data_dir)
    if ann is None:
        return None
    body = {k: v for k, v in body.items() if v is not None}
    if isinstance(body.get("image"), (str, bytes)):
        body["image"] = shrunk_image(body["image"])
    try:
        return _post(ann, "/search", body)
    except (OSError, ValueError) as exc:
        import logging  # here: logging costs ~7 ms of start-up and is needed only when something went wrong

        logging.getLogger(__name__).info(
            "the announced server at %s does not answer (%s); searching in-process", ann.url, exc
        )
        return None


def shrunk_image(image: str | bytes) -> str:
    """An image query as this client sends it: a data URI of :func:`indexer.core.images.for_sending`'s bytes (a
    photo of any size downscaled to the projector's 1024 pixels a side, so it fits the server's body cap and
    embeds as the indexed copy did). A path (an indexed file the server reads itself) is sent as it is."""
    if isinstance(image, str) and not image.startswith("data:"):
        return image
    from indexer.codec import data_uri, decode_data_uri  # only with an image: the text fast path stays light
    from indexer.core.images import MAX_LOCAL_IMAGE_BYTES, for_sending

    data = image if isinstance(image, bytes) else decode_data_uri(image, MAX_LOCAL_IMAGE_BYTES)
    return data_uri(for_sending(data))


def _post(ann: announce.Announcement, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """(status, decoded JSON or text) of one POST; OSError when nothing answers, ValueError when the answer is
    not HTTP/1.x as our server writes it."""
    host, port = _address(ann.url)
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {ann.token}\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((host.strip("[]"), port), timeout=TIMEOUT_S) as sock:
        sock.sendall(head.encode("latin-1") + data)
        received = []
        while chunk := sock.recv(65536):
            received.append(chunk)
    status, headers, payload = _parse_response(b"".join(received))
    if "chunked" in headers.get("transfer-encoding", ""):
        payload = _dechunk(payload)
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode("utf-8", errors="replace")


def _address(url: str) -> tuple[str, int]:
    """(host, port) of an announced ``http://host:port`` address."""
    if not url.startswith("http://"):
        raise ValueError(f"not an http:// address: {url}")
    host, _, port = url[len("http://") :].split("/", 1)[0].rpartition(":")
    return host, int(port)


def _parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, sep, payload = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not sep or not lines[0].startswith("HTTP/1."):
        raise ValueError("not an HTTP/1.x response")
    status = int(lines[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip().lower() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, payload


def _dechunk(payload: bytes) -> bytes:
    """The body of a ``Transfer-Encoding: chunked`` response."""
    out: list[bytes] = []
    rest = payload
    while True:
        size_line, sep, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if not sep or size == 0:
            return b"".join(out)
        out.append(rest[:size])
        rest = rest[size + 2 :]
