"""Searching: query preparation and the search run (dense, lexical, hybrid fusion) with the one rerank stage."""
