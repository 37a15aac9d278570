"""Documented import path (docs/qdrant-plugin.md); the code lives in :mod:`indexer.core.normalization`."""

from indexer.core.normalization import Normalization, choose_normalization, normalization_name, normalize

__all__ = ["Normalization", "choose_normalization", "normalization_name", "normalize"]
