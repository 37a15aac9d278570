"""A Qdrant server's own snapshot API, for ``indexer backup`` / ``indexer restore`` of a server collection."""

from __future__ import annotations

from pathlib import Path

import httpx
from qdrant_client import QdrantClient

from indexer.plugin_api import StoreError


def _headers(api_key: str | None) -> dict[str, str]:
    return {"api-key": api_key} if api_key else {}


def server_snapshot(url: str, name: str, dest: Path, api_key: str | None) -> int:
    """Create a snapshot of ``name``, download it into ``dest``, delete the server-side copy; returns the points."""
    client = QdrantClient(url=url, api_key=api_key, timeout=300, check_compatibility=False)
    try:
        snap = client.create_snapshot(name, wait=True)
        if snap is None:
            raise StoreError(f"Qdrant at {url} made no snapshot of {name!r}")
        count = int(client.count(name, exact=True).count)
        dest.mkdir(parents=True, exist_ok=True)
        with httpx.stream(
            "GET", f"{url.rstrip('/')}/collections/{name}/snapshots/{snap.name}", headers=_headers(api_key),
            timeout=300,
        ) as response:
            response.raise_for_status()
            with open(dest / f"{name}.snapshot", "wb") as fh:
                for part in response.iter_bytes():
                    fh.write(part)
        client.delete_snapshot(name, snap.name)
        return count
    except (httpx.HTTPError, OSError, ValueError, RuntimeError) as exc:
        raise StoreError(f"Qdrant snapshot of {name!r} at {url} failed: {exc}; check the server and API key") from exc
    finally:
        client.close()


def server_restore(url: str, name: str, snapshot: Path, api_key: str | None) -> None:
    """Upload ``snapshot`` as collection ``name`` (it replaces what the server holds under that name)."""
    try:
        with open(snapshot, "rb") as fh:
            response = httpx.post(
                f"{url.rstrip('/')}/collections/{name}/snapshots/upload",
                params={"priority": "snapshot", "wait": "true"},
                files={"snapshot": (snapshot.name, fh)},
                headers=_headers(api_key),
                timeout=600,
            )
        response.raise_for_status()
    except (httpx.HTTPError, OSError) as exc:
        raise StoreError(f"cannot restore Qdrant collection {name!r} at {url}: {exc}") from exc
