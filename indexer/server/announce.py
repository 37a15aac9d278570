"""A running server announces itself in its data directory: ``server.json`` (address, pid, token; mode 0600).

The CLI reads it to send searches to the server instead of loading the model (and it is the one way to search an
embedded Qdrant store while the server writes it). The token is an admin key of that server, so only users who
can read the data directory can use it. The file is removed when the server exits; a file left by a killed
server is ignored (its pid is gone or the address does not answer) and replaced by the next server.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from indexer.core.locks import process_alive

FILE_NAME = "server.json"


@dataclass(frozen=True)
class Announcement:
    url: str
    pid: int
    token: str
    started: float
    data_dir: str

    @staticmethod
    def new(url: str, data_dir: Path) -> Announcement:
        import secrets  # here, not at the top: `indexer search` reads announcements and should start fast

        return Announcement(url, os.getpid(), secrets.token_urlsafe(32), time.time(), str(data_dir))


def path_for(data_dir: Path | str) -> Path:
    return Path(data_dir) / FILE_NAME


def write(data_dir: Path | str, ann: Announcement) -> Path:
    target = path_for(data_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(asdict(ann), fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    return target


def read(data_dir: Path | str) -> Announcement | None:
    """The announcement, or None when there is none, it is unreadable, or its process is gone."""
    try:
        raw = json.loads(path_for(data_dir).read_text(encoding="utf-8"))
        ann = Announcement(
            str(raw["url"]), int(raw["pid"]), str(raw["token"]), float(raw["started"]), str(raw["data_dir"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return ann if process_alive(ann.pid) else None


def remove(data_dir: Path | str, ann: Announcement) -> None:
    """Remove the file if it is still ours (a later server may have replaced it)."""
    current = path_for(data_dir)
    try:
        raw = json.loads(current.read_text(encoding="utf-8"))
        if raw.get("pid") == ann.pid and raw.get("token") == ann.token:
            current.unlink()
    except (OSError, ValueError):
        pass


