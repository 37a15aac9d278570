"""The one model loader: a model spec (catalogue name, name:quant or a GGUF path) from the settings, resolved
through the model cache, and opened as the Embedder or Reranker port with the settings' threads and caps.

Collections, the HTTP service's ``/v1/*`` endpoints and the Qdrant attach plugin all load models here, so a new
loading rule (a model profile, a thread count) reaches every one of them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from indexer.engine.adapters import LlamaEmbedder, LlamaReranker
    from indexer.settings import Settings


def resolve(spec: str) -> Path:
    """The GGUF file of ``spec``, built into the cache when it is a catalogue model not built yet."""
    from indexer.models import resolve_model

    return resolve_model(spec)


def names_recorded_file(spec: str, recorded_path: str) -> bool:
    """Whether ``spec`` (a catalogue name without a weight type) names the model file a collection recorded at
    another weight type than today's default: then the collection keeps its file."""
    from indexer.models import names_catalogue_file

    return names_catalogue_file(spec, recorded_path)


def load_embedder(settings: Settings, path: str | Path | None = None) -> LlamaEmbedder:
    """The embedding model at ``path`` (default: the ``embed_model`` setting)."""
    from indexer.engine.adapters import LlamaEmbedder, projector_beside  # llama.cpp loads on first use

    model = str(path if path is not None else resolve(settings.embed_model))
    return LlamaEmbedder(model, mmproj_path=projector_beside(model), n_threads=settings.threads)


def embeds_images(model_path: str | Path) -> bool:
    """Whether the model file at ``model_path`` embeds images (its projector lies beside it), without loading it."""
    from indexer.engine.adapters import projector_beside

    return projector_beside(model_path) is not None


def load_reranker(settings: Settings) -> LlamaReranker | None:
    """The ``rerank_model`` setting's cross-encoder, or None when no reranker is configured."""
    if not settings.rerank_model:
        return None
    from indexer.engine.adapters import LlamaReranker

    return LlamaReranker(
        str(resolve(settings.rerank_model)), max_tokens=settings.rerank_max_tokens, n_threads=settings.threads
    )
