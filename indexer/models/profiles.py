"""Model profiles: the defaults a downloaded GGUF of a known family gets without configuration.

Recognised from the GGUF's own metadata (``general.architecture``, ``general.name`` / ``general.basename``), so a
user's ``bge-m3-q8_0.gguf`` or ``Qwen3-Embedding-0.6B-Q8_0.gguf`` is embedded the way the model was trained: its
query/document prompts (Qwen3-Embedding puts an instruction before queries only; jina-embeddings-v3 has a task
prefix per side) and a chunk size. Settings always win, and prompts the GGUF records itself come before the
family's; what a collection was created with is recorded with it. Pooling and the trained similarity come from
the GGUF itself (its pooling type, ``indexer.similarity``); a reranker's prompt template from its
``tokenizer.chat_template.rerank``, which the engine applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

QWEN3_EMBEDDING_QUERY = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"


@dataclass(frozen=True)
class ModelProfile:
    family: str
    query_prompt: str = ""
    document_prompt: str = ""
    chunk_tokens: int = 0  # tokens per chunk for new collections (0: the model's limit)


_PROFILES: tuple[tuple[str, tuple[str, ...], ModelProfile], ...] = (
    # (general.architecture, words all found in the model's name, profile); the first match wins
    ("qwen3", ("embedding",), ModelProfile("qwen3-embedding", query_prompt=QWEN3_EMBEDDING_QUERY, chunk_tokens=512)),
    ("qwen3", ("reranker",), ModelProfile("qwen3-reranker")),
    ("jina-bert-v3", (), ModelProfile(
        "jina-embeddings-v3", query_prompt="Represent the query for retrieving evidence documents: ",
        document_prompt="Represent the document for retrieval: ", chunk_tokens=512)),
    ("jina-bert-v2", (), ModelProfile("jina-embeddings-v2", chunk_tokens=512)),
    ("bert", ("bge", "m3", "reranker"), ModelProfile("bge-reranker-v2-m3")),
    ("bert", ("bge", "m3"), ModelProfile("bge-m3", chunk_tokens=512)),
    ("xlm-roberta", ("bge", "m3", "reranker"), ModelProfile("bge-reranker-v2-m3")),
    ("xlm-roberta", ("bge", "m3"), ModelProfile("bge-m3", chunk_tokens=512)),
)


def profile_for(metadata: Mapping[str, object]) -> ModelProfile | None:
    """The profile of the model whose GGUF metadata this is, or None for a model of no known family."""
    arch = str(metadata.get("general.architecture", "")).lower()
    name = " ".join(str(metadata.get(k, "")) for k in ("general.name", "general.basename")).lower()
    for family_arch, words, profile in _PROFILES:
        if arch == family_arch and all(w in name for w in words):
            return profile
    return None
