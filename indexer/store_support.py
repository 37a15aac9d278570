"""Documented import path of the store helpers (docs/plugins.md); plugins now use :mod:`indexer.plugin_api`."""

from indexer.core.vectors import ancestor_dirs, canonical_id, prepare_vector

__all__ = ["ancestor_dirs", "canonical_id", "prepare_vector"]
