"""A document read that runs on another machine (a Ray node: docs/deploy.md#indexing-on-a-ray-cluster).

:meth:`FilesystemSource.parse_job` gives a :class:`RemoteRead`: picklable, it carries the reader, the file's ref,
its limits and either the file's bytes (read by the writer: the file may exist only on its machine) or, with
``shared`` (the roots are visible at the same paths on the nodes), only the path. Called where it lands, it does
what :meth:`FilesystemSource.read` does for a heavy read: the binary sniff of text readers, the parse in a worker
process of that machine under the same time and memory limits (:mod:`plugins.filesystem.isolation`), the
content hash of the bytes. A shared path that is not there (or not the same file) on that machine raises
SourceError code ``not_shared``: the caller sends the bytes instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
from dataclasses import dataclass

from indexer.plugin_api import Document, Reader, SourceError, SourceRef
from plugins.filesystem.isolation import ParsePool
from plugins.filesystem.readers import looks_like_text

NOT_SHARED = "not_shared"
SNIFF_BYTES = 8192
_pools: dict[tuple[float, int], ParsePool] = {}  # per process (a Ray worker): one parse worker per limits
_pools_lock = threading.Lock()


@dataclass(frozen=True)
class RemoteRead:
    """One heavy read, for another machine (see the module docstring)."""

    reader: Reader
    ref: SourceRef
    data: bytes | None  # None: read ``ref.path`` where it runs (a shared filesystem)
    cap: int  # the most bytes the file may have (max_file_size or max_image_file_size)
    timeout: float | None  # parse_timeout (None: parsed in the calling process)
    memory_mb: int

    def __call__(self) -> Document:
        data = self.data if self.data is not None else self._read_shared()
        ref, reader = self.ref, self.reader
        if getattr(reader, "reads_text", False) and not looks_like_text(data[:SNIFF_BYTES],
                                                                         complete=len(data) < SNIFF_BYTES):
            raise SourceError(ref.path, "binary content (not text in any encoding); not indexed", code="binary")
        try:
            if self.timeout is not None:
                doc = _pool(self.timeout, self.memory_mb).read(reader, ref, data)
            else:
                doc = reader.read(ref, data)
        except SourceError:
            raise
        except Exception as exc:  # a reader bug or library error must not escape as something else
            raise SourceError(ref.path, f"{reader.kind} reader failed ({type(exc).__name__}: {exc})") from exc
        return dataclasses.replace(doc, ref=ref, content_hash=hashlib.sha256(data).hexdigest())

    def _read_shared(self) -> bytes:
        """The file at the writer's path on this machine, when it is the file the writer scanned (same size)."""
        path = self.ref.path
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                data = handle.read(self.cap + 1) if size == self.ref.size else b""
        except OSError as exc:
            raise SourceError(path, f"not readable at the same path on this node ({exc.strerror})", NOT_SHARED) from exc
        if size != self.ref.size or len(data) != self.ref.size:
            raise SourceError(path, f"another file at the same path on this node ({size} bytes, the writer saw "
                              f"{self.ref.size})", NOT_SHARED)
        return data


def _pool(timeout: float, memory_mb: int) -> ParsePool:
    with _pools_lock:
        pool = _pools.get((timeout, memory_mb))
        if pool is None:
            pool = _pools[(timeout, memory_mb)] = ParsePool(timeout, memory_mb, 1)
        return pool
