"""Frozen values that cross module boundaries."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np


class Metric(str, Enum):
    """Distance a vector store computes. FAISS offers IP (= DOT) and L2 (= EUCLID)."""

    COSINE = "cosine"
    DOT = "dot"
    EUCLID = "euclid"
    MANHATTAN = "manhattan"


class Similarity(str, Enum):
    """The similarity an embedding model was trained for (recorded in its GGUF by our converter)."""

    COSINE = "cosine"
    DOT = "dot"
    EUCLIDEAN = "euclidean"


@dataclass(frozen=True)
class SourceRef:
    """A file found by a source scan (stat data only, content not read)."""

    root: str  # absolute, resolved root the file was found under
    path: str  # absolute, resolved path of the file
    size: int
    mtime_ns: int

    @property
    def rel_path(self) -> str:
        return self.path[len(self.root) :].lstrip("/") if self.path.startswith(self.root) else self.path


ROOT_UNAVAILABLE = "root_unavailable"


@dataclass(frozen=True)
class ScanProblem:
    """A file or folder a source scan could not take, and why. ``code`` is one of: ``permission``,
    ``too_large``, ``binary``, ``outside_root``, ``symlink_loop``, ``broken_symlink``, ``not_regular``,
    ``root_unavailable`` (:data:`ROOT_UNAVAILABLE`), ``error``."""

    path: str
    reason: str
    code: str = "error"

    def __iter__(self) -> Iterator[str]:  # unpacks as (path, reason)
        return iter((self.path, self.reason))


@dataclass(frozen=True)
class Document:
    """A file's text as a reader extracted it."""

    ref: SourceRef
    text: str
    kind: str  # reader name: text, markdown, rst, code, html, pdf
    # For PDF: character offset in ``text`` where each page starts (page 1 first). Empty otherwise.
    page_starts: tuple[int, ...] = ()
    content_hash: str = ""  # sha256 of the raw file bytes


@dataclass(frozen=True)
class Chunk:
    """A piece of a document small enough for the embedding model, with where it came from."""

    path: str
    index: int  # position of the chunk within its document
    text: str
    start_byte: int  # span in the UTF-8 encoded document text
    end_byte: int
    start_line: int  # 1-based, inclusive
    end_line: int
    n_tokens: int  # tokens the model sees, special tokens included
    page: int | None = None  # 1-based page for PDF
    heading: tuple[str, ...] = ()  # Markdown/RST heading path

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Point:
    """A vector with its id (a UUID string) and payload, ready for a store."""

    id: str
    vector: np.ndarray
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Filter:
    """Restrictions a store applies natively at search time."""

    path_prefix: str | None = None  # absolute directory or file path
    file_types: tuple[str, ...] = ()  # reader kinds or extensions without dot, e.g. ("md", "py")


@dataclass(frozen=True)
class Hit:
    """A store search result; ``score`` is higher-is-better whatever the metric."""

    id: str
    score: float
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class SearchHit:
    """A search result as the user sees it."""

    path: str
    score: float
    rerank_score: float | None
    text: str
    start_line: int
    end_line: int
    page: int | None
    heading: tuple[str, ...]
    chunk_id: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "score": self.score,
            "rerank_score": self.rerank_score,
            "text": self.text,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "page": self.page,
            "heading": list(self.heading),
            "chunk_id": self.chunk_id,
        }
