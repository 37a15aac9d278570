"""Text to vectors and scores on llama.cpp: :class:`LlamaEmbedding` (the seed's API), its batch planner, and the
adapters that give the Embedder and Reranker ports. Model files (catalogue, cache, converter) are in
:mod:`indexer.models`."""
