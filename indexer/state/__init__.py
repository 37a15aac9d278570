"""What indexer remembers: the SQLite state store (all its SQL is in :mod:`indexer.state.database`) and a
watcher's queue and status files (:mod:`indexer.state.watch_files`). Schema changes are in ``migrations/``."""
