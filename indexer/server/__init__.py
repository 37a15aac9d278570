"""`indexer serve`: the HTTP API (search, /v1/embeddings, /v1/rerank, status, metrics, MCP, search page).

``create_app(settings)`` (in :mod:`indexer.server.app`) builds the ASGI app; :mod:`indexer.server.run` serves it
with uvicorn. This package imports no web framework until one of those is used.
"""
