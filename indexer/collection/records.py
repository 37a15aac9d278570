"""Collection records without a :class:`~indexer.collection.facade.Collection`: list them, and the narrow
functions a plugin that attaches collections of its own kind uses (through ``indexer.plugin_api``)."""

from __future__ import annotations

from pathlib import Path

from indexer.core import registry
from indexer.settings import Settings, load_settings
from indexer.state.database import CollectionRecord, StateStore


def open_state(settings: Settings) -> StateStore:
    return StateStore(Path(settings.data_dir) / "state.sqlite")


def list_collections(settings: Settings | None = None) -> list[CollectionRecord]:
    settings = settings or load_settings()
    if settings.stateless:  # a search worker: the collection its store holds (no state database)
        from indexer.collection.stateless import stateless_records

        return stateless_records(settings)
    state = open_state(settings)
    try:
        return state.list_collections()
    finally:
        state.close()


def get_record(name: str, settings: Settings) -> CollectionRecord | None:
    """The recorded collection ``name``, or None."""
    state = open_state(settings)
    try:
        return state.get_collection(name)
    finally:
        state.close()


def add_record(rec: CollectionRecord, settings: Settings) -> None:
    """Record a new collection (its store already holds, or will create, its vectors)."""
    state = open_state(settings)
    try:
        state.create_collection(rec)
    finally:
        state.close()


def remove_record(name: str, settings: Settings) -> bool:
    """Forget collection ``name`` (its roots, files and chunks) without touching its store; True if it existed."""
    state = open_state(settings)
    try:
        if state.get_collection(name) is None:
            return False
        state.drop_collection(name)
        return True
    finally:
        state.close()


def single_process(rec: CollectionRecord) -> bool:
    """Whether only one process at a time may open the store of collection ``rec`` (asks its store plugin)."""
    return registry.single_process(rec.store, rec.store_options)
