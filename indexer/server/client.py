"""The CLI's side of a running server: send a search to the server that serves this data directory.

Standard library only (``http.client``), so ``indexer search`` against a running server starts fast.
"""

from __future__ import annotations

import http.client
import json
import logging
import urllib.parse
from pathlib import Path
from typing import Any

from indexer.errors import IndexerError, InputError, NotFoundError
from indexer.server import announce

logger = logging.getLogger(__name__)

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
    try:
        return _post(ann, "/search", {k: v for k, v in body.items() if v is not None})
    except (OSError, http.client.HTTPException) as exc:
        logger.info("the announced server at %s does not answer (%s); searching in-process", ann.url, exc)
        return None


def _post(ann: announce.Announcement, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    url = urllib.parse.urlsplit(ann.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=TIMEOUT_S)
    try:
        data = json.dumps(body).encode()
        conn.request(
            "POST",
            path,
            body=data,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {ann.token}"},
        )
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(raw)
    except ValueError:
        return resp.status, raw.decode("utf-8", errors="replace")


def result_from_json(answer: dict[str, Any]) -> Any:
    """A SearchResult from a /search answer (so the CLI prints remote and local results the same way)."""
    from indexer.query import SearchResult
    from indexer.types import SearchHit

    hits = tuple(
        SearchHit(
            path=h["path"],
            score=float(h["score"]),
            rerank_score=None if h.get("rerank_score") is None else float(h["rerank_score"]),
            text=h["text"],
            start_line=int(h["start_line"]),
            end_line=int(h["end_line"]),
            page=h.get("page"),
            heading=tuple(h.get("heading") or ()),
            chunk_id=str(h.get("chunk_id", "")),
        )
        for h in answer["hits"]
    )
    timings = {k: float(v) for k, v in answer.get("timings_ms", {}).items()}
    return SearchResult(
        hits,
        bool(answer.get("reranked")),
        str(answer.get("rerank_note", "")),
        timings,
        str(answer.get("mode", "dense")),
    )
