"""``python -m indexer``: the same as the ``indexer`` console script."""

from indexer.cli.entry import main

main()
