"""``python -m indexer``: the same as the ``indexer`` console script."""

from indexer.entry import main

main()
