"""``python -m indexer.cli``: the full CLI in-process (skips the console script's fast path through a server)."""

from indexer.cli.main import main

main()
