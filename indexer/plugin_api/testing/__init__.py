"""The contract suites a store plugin runs on itself: the ones this project runs on its own stores.

A third-party store registered under ``indexer.stores`` proves it behaves as the core expects with two files::

    # conftest.py
    import pytest
    from indexer.plugin_api.testing.fixtures import collection, make_store  # noqa: F401 - the suites' fixtures

    @pytest.fixture
    def store_kind() -> str:
        return "mystore"  # the entry point's name

    # test_contract.py
    from indexer.plugin_api.testing.store_contract import *  # noqa: F403 - the VectorStore contract
    from indexer.plugin_api.testing.lexical_contract import *  # noqa: F403 - only if it keeps a lexical index

:mod:`~indexer.plugin_api.testing.store_contract` is the VectorStore port (create, meta, upsert, delete, search
order against brute force for every metric, filters, hidden points, reopen); :mod:`~indexer.plugin_api.testing.
lexical_contract` the LexicalSearch port (BM25 ranking, filters, upserts and deletes in step). A store without a
lexical index skips the second suite. Needs pytest (a core dependency).
"""
