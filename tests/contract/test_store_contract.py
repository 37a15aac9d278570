"""The store contract over every registered store: the suite plugin authors import too
(indexer/plugin_api/testing/store_contract.py), collected here with the stores of tests/contract/conftest.py."""

from indexer.plugin_api.testing.store_contract import *  # noqa: F403 - the contract's tests, collected here
from indexer.plugin_api.testing.store_contract import DIM  # noqa: F401 - the fixtures size vectors by it
