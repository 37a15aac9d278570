"""``indexer migrate``: show and apply the state database's pending schema migrations.

Opening a collection applies them too (``indexer.state.database``); this module lets an operator see what an upgrade
will do first (``--status``, ``--dry-run``: the database is opened read-only and nothing is written) and apply
it at a moment of their choosing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from indexer import migrations
from indexer.errors import StateError
from indexer.settings import Settings

STATE_FILE = "state.sqlite"


@dataclass(frozen=True)
class MigrateReport:
    database: str
    exists: bool
    applied: tuple[str, ...]  # recorded before this call
    pending: tuple[str, ...]  # still to apply (before this call)
    unknown: tuple[str, ...]  # recorded by a newer indexer
    applied_now: tuple[str, ...] = ()
    dry_run: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "database": self.database,
            "exists": self.exists,
            "applied": list(self.applied),
            "pending": list(self.pending),
            "unknown": list(self.unknown),
            "applied_now": list(self.applied_now),
            "dry_run": self.dry_run,
        }


def state_path(settings: Settings) -> Path:
    return Path(settings.data_dir) / STATE_FILE


def migration_status(settings: Settings) -> MigrateReport:
    """What is applied and pending, read without writing (a missing database has every migration pending)."""
    path = state_path(settings)
    if not path.exists():
        names = tuple(m.__name__ for m in migrations.MIGRATIONS)
        return MigrateReport(str(path), False, (), names, ())
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
        try:
            plan = migrations.plan(db)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise StateError(
            f"cannot read the state database {path}: {exc}; restore it from a backup or move it aside"
        ) from exc
    return MigrateReport(str(path), True, plan.applied, plan.pending, plan.unknown)


def migrate(settings: Settings, dry_run: bool = False) -> MigrateReport:
    """Apply pending migrations (none with ``dry_run``); a database from a newer indexer is refused."""
    before = migration_status(settings)
    if before.unknown:
        raise StateError(
            f"the state database {before.database} was written by a newer indexer (migrations "
            f"{', '.join(before.unknown)}); upgrade indexer or use another INDEXER_DATA_DIR"
        )
    if dry_run or not before.pending:
        return MigrateReport(**{**before.__dict__, "dry_run": dry_run})
    from indexer.state.database import StateStore  # opening applies the pending migrations under SQLite's write lock

    store = StateStore(state_path(settings))
    try:
        after = set(store.applied_migrations())
    finally:
        store.close()
    done = tuple(n for n in before.pending if n in after)
    return MigrateReport(**{**before.__dict__, "applied_now": done})
