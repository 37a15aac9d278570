"""Indexing: the pipeline (plan -> chunk -> embed what is new -> upsert -> delete stale -> commit), chunking and
the prompts applied to documents and queries."""
