"""Operations on a data directory: backup and restore, schema upgrades (``indexer migrate``)."""
