"""Open a qdrant-client on a server URL or an embedded folder, and translate its errors into indexer.errors."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from indexer.plugin_api import ConfigError, StoreError, StoreUnavailableError, user_path

logger = logging.getLogger(__name__)

T = TypeVar("T")


# Embedded Qdrant admits one client per folder, in a process too (its lock file is held per open file): every
# attachment, store and endpoint of this process that opens one folder shares one client, counted here.
_SHARED: dict[str, list[Any]] = {}  # resolved folder -> [client, users]
_SHARED_LOCK = threading.Lock()


def open_client(url: str | None, path: str | Path | None, api_key: str | None, timeout: float = 10.0) -> QdrantClient:
    """A client on exactly one of ``url`` (server) or ``path`` (embedded folder, which must already exist).
    An embedded folder's client is shared by every user in this process; give it back with :func:`close_client`."""
    if path is not None and url is None:
        key = str(user_path(path))
        with _SHARED_LOCK:
            entry = _SHARED.get(key)
            if entry is None:
                entry = _SHARED[key] = [_open(None, path, api_key, timeout), 0]
            entry[1] += 1
            return entry[0]
    return _open(url, path, api_key, timeout)


def close_client(client: QdrantClient) -> None:
    """Give back a client of :func:`open_client`: a shared embedded one closes with its last user."""
    with _SHARED_LOCK:
        for key, entry in list(_SHARED.items()):
            if entry[0] is client:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _SHARED[key]
                break
    client.close()


def _open(url: str | None, path: str | Path | None, api_key: str | None, timeout: float) -> QdrantClient:
    if (url is None) == (path is None):
        raise ConfigError("pass exactly one of --url (a Qdrant server) or --path (an embedded Qdrant folder)")
    if path is not None:
        folder = Path(path).expanduser()
        if not folder.is_dir() or not (folder / "meta.json").is_file():
            # opening any other folder would write Qdrant's .lock and meta.json into it: never
            raise ConfigError(
                f"{folder} is not an embedded Qdrant folder (no meta.json in it); pass the folder given to "
                "QdrantClient(path=...)"
            )
        try:
            return QdrantClient(path=str(folder))
        except RuntimeError as exc:
            if "already accessed" in str(exc):
                raise StoreError(
                    f"another process holds the embedded Qdrant folder {folder} (one client per folder); stop it, "
                    "or serve the collection with a Qdrant server and pass --url"
                ) from exc
            raise StoreError(f"cannot open embedded Qdrant at {folder}: {exc}") from exc
    try:
        return QdrantClient(url=url, api_key=api_key, timeout=max(1, int(round(timeout))), check_compatibility=False)
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot open Qdrant at {url}: {exc}") from exc


def call(where: str, what: str, fn: Callable[[], T]) -> T:
    """Run one client call; every failure becomes a StoreError naming the collection and the operation."""
    try:
        return fn()
    except UnexpectedResponse as exc:
        body = ""
        with contextlib.suppress(Exception):  # the body only decorates the message
            body = exc.content.decode("utf-8", "replace")[:300]
        if exc.status_code in (401, 403):
            raise StoreError(f"Qdrant at {where} refused to {what}: HTTP {exc.status_code}; check the API key") from exc
        raise StoreError(f"Qdrant at {where} refused to {what}: HTTP {exc.status_code} {body}") from exc
    except (ResponseHandlingException, httpx.TransportError, ConnectionError) as exc:
        raise StoreUnavailableError(
            f"cannot reach Qdrant at {where} to {what} ({exc}); start the server or check the URL"
        ) from exc
    except (RuntimeError, ValueError, KeyError, TypeError, AssertionError) as exc:
        raise StoreError(f"Qdrant ({where}) failed to {what}: {exc}") from exc
