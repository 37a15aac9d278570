"""Migrations: SQLite's own statement splitting, the runner's plan, dry runs and refusal of newer states."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from indexer import migrations
from indexer.errors import StateError
from indexer.migrations import MIGRATIONS, plan, run_script, split_statements, upgrade
from indexer.state.database import StateStore

FIXTURE_STATE = Path(__file__).parents[1] / "fixtures" / "data-v0.1" / "data" / "state.sqlite"


def test_split_keeps_semicolons_inside_literals_comments_and_triggers():
    script = """
        -- a comment; with a semicolon
        CREATE TABLE t (x TEXT DEFAULT 'a;b');   /* block; comment */
        INSERT INTO t VALUES ('it''s; -- not a comment');
        CREATE TRIGGER tr AFTER INSERT ON t BEGIN
            UPDATE t SET x = x || ';' WHERE rowid = new.rowid;
        END;
    """
    statements = list(split_statements(script))
    assert len(statements) == 3
    assert "INSERT INTO t" in statements[1] and "'it''s; -- not a comment'" in statements[1]
    assert statements[2].startswith("CREATE TRIGGER") and statements[2].endswith("END;")


def test_split_refuses_an_unterminated_statement():
    with pytest.raises(ValueError, match="incomplete SQL"):
        list(split_statements("CREATE TABLE t (x); INSERT INTO t VALUES ('open"))


def test_a_migration_with_string_literals_applies_inside_its_transaction(tmp_path):
    def m0001_t(db):
        run_script(db, "CREATE TABLE t (x TEXT); INSERT INTO t VALUES ('a;b -- c'); INSERT INTO t VALUES (';');")

    def m0002_broken(db):
        run_script(db, "INSERT INTO t VALUES ('half'); CREATE TABLE t (dup);")  # fails on the second statement

    db = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    assert upgrade(db, [m0001_t]) == ["m0001_t"]
    assert [r[0] for r in db.execute("SELECT x FROM t ORDER BY rowid")] == ["a;b -- c", ";"]
    with pytest.raises(sqlite3.OperationalError):
        upgrade(db, [m0001_t, m0002_broken])
    assert db.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 2  # 'half' rolled back with the migration
    assert plan(db, [m0001_t, m0002_broken]).pending == ("m0002_broken",)


def test_plan_reports_applied_pending_and_unknown(tmp_path):
    db = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    assert plan(db).pending == tuple(m.__name__ for m in MIGRATIONS) and plan(db).applied == ()
    upgrade(db, MIGRATIONS[:1])
    p = plan(db)
    assert p.applied == ("m0001_initial",) and p.pending == tuple(m.__name__ for m in MIGRATIONS[1:])
    db.execute("INSERT INTO schema_migrations VALUES ('m9999_future', 0)")
    assert plan(db).unknown == ("m9999_future",)
    with pytest.raises(migrations.NewerStateError, match="m9999_future"):
        upgrade(db)


def _schema(path: Path) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        out = {t: db.execute(f"PRAGMA table_info({t})").fetchall() for t in tables}
        for (index,) in db.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"):
            out[f"index {index}"] = db.execute(f"PRAGMA index_info({index})").fetchall()
        return out
    finally:
        db.close()


def test_the_v01_state_upgrades_to_the_schema_of_a_fresh_database(tmp_path):
    old = tmp_path / "old" / "state.sqlite"
    old.parent.mkdir()
    shutil.copy2(FIXTURE_STATE, old)
    StateStore(old).close()
    StateStore(tmp_path / "fresh.sqlite").close()
    assert _schema(old) == _schema(tmp_path / "fresh.sqlite")


def _cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "INDEXER_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "indexer.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_cli_migrate_status_dry_run_and_apply(tmp_path):
    names = [m.__name__ for m in MIGRATIONS]
    dry = _cli("migrate", "--dry-run", "--json", data_dir=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["pending"] == names and json.loads(dry.stdout)["applied_now"] == []
    assert not (tmp_path / "state.sqlite").exists()  # a dry run creates nothing

    applied = _cli("migrate", data_dir=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert all(f"applied  {n} (now)" in applied.stdout for n in names), applied.stdout
    status = _cli("migrate", "--status", "--json", data_dir=tmp_path)
    assert json.loads(status.stdout)["applied"] == names and json.loads(status.stdout)["pending"] == []
    again = _cli("migrate", data_dir=tmp_path)
    assert again.returncode == 0 and "(now)" not in again.stdout and "up to date" in again.stderr


def test_cli_dry_run_on_the_v01_state_changes_nothing(tmp_path):
    shutil.copy2(FIXTURE_STATE, tmp_path / "state.sqlite")
    before = (tmp_path / "state.sqlite").read_bytes()
    dry = _cli("migrate", "--dry-run", "--json", data_dir=tmp_path)
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["applied"] == ["m0001_initial"] and report["pending"] == [m.__name__ for m in MIGRATIONS[1:]]
    assert (tmp_path / "state.sqlite").read_bytes() == before


def test_cli_refuses_a_state_from_a_newer_indexer_with_one_clear_line(tmp_path):
    StateStore(tmp_path / "state.sqlite").close()
    db = sqlite3.connect(tmp_path / "state.sqlite")
    db.execute("INSERT INTO schema_migrations VALUES ('m9999_from_the_future', 0)")
    db.commit()
    db.close()
    for args in (("migrate",), ("migrate", "--dry-run"), ("status",), ("collections",)):
        result = _cli(*args, data_dir=tmp_path)
        assert result.returncode == 1, (args, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "newer indexer" in lines[0] and "m9999_from_the_future" in lines[0], result.stderr
        assert "Traceback" not in result.stderr
    with pytest.raises(StateError, match="upgrade indexer"):
        StateStore(tmp_path / "state.sqlite")
