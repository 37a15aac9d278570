"""The one exception tree of indexer.

Every error the library raises on purpose derives from :class:`IndexerError`; errors of third-party
libraries are translated at the adapter that calls them (``raise StoreError(...) from exc``)::

    IndexerError
    ├── ConfigError          bad settings, flags or combinations (e.g. a metric the model cannot use)
    ├── ModelError           a model cannot be found, built, loaded or run
    │   └── ModelUnavailableError   the model is not built and cannot be fetched (offline)
    ├── InputError           bad input to a public call (too many tokens, wrong types, bad query)
    │   └── NotFoundError       a named thing (collection, model, indexed file) does not exist
    ├── SourceError          a file or folder cannot be read (carries the path and the reason)
    ├── StoreError           the vector store failed or refused
    │   ├── StoreUnavailableError   the store cannot be reached (retryable)
    │   └── CollectionMismatchError the collection was made with another model/normalization/metric
    ├── StateError           the SQLite state store is unusable (corrupt, locked, newer schema)
    ├── ClusterError         the Ray cluster cannot be joined or used (indexing with ``--cluster``)
    └── LockedError          a collection, store or model build is held by another process (wait and retry)

Messages name the problem and the fix.
"""

from __future__ import annotations


class IndexerError(Exception):
    """Root of every error raised by indexer."""


class ConfigError(IndexerError):
    """Settings, flags or their combination are invalid."""


class ModelError(IndexerError):
    """A model cannot be found, built, loaded or run."""


class ModelUnavailableError(ModelError):
    """The model is not in the cache and cannot be fetched (for example offline)."""


class InputError(IndexerError, ValueError):
    """Bad input to a public call."""


class NotFoundError(InputError):
    """A named collection, model or indexed file does not exist (HTTP 404)."""

    @classmethod
    def collection(cls, name: str) -> NotFoundError:
        """The one answer every front end gives for a collection that does not exist (HTTP 404, CLI exit 1, an
        MCP tool error): the same words everywhere."""
        return cls(
            f"collection {name!r} does not exist; `indexer collections` (GET /collections) lists them, "
            f"`indexer index PATH -c {name}` makes it"
        )


class SourceError(IndexerError):
    """A source file cannot be read. ``code`` ``binary`` means it is not text: skipped, not failed."""

    def __init__(self, path: str, reason: str, code: str = "error") -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.code = code


class StoreError(IndexerError):
    """The vector store failed or refused an operation."""


class StoreUnavailableError(StoreError):
    """The vector store cannot be reached; the operation may be retried."""


class CollectionMismatchError(StoreError):
    """A collection's recorded model, normalization or metric disagrees with the settings."""


class StateError(IndexerError):
    """The state store is unusable."""


class ClusterError(IndexerError):
    """The Ray cluster named by the ``cluster`` setting cannot be joined (unreachable, no token) or used."""


class LockedError(IndexerError):
    """A lock (collection writer, store writer, model build) is held by another process or thread."""
