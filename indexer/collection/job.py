"""The record of a reindex under way (:mod:`indexer.collection.reindex` runs it): ``<data dir>/reindex/<name>/``
holds ``job.json`` (the target model and the store collection its vectors go to) and the shadow state database.

Readers ask it two things: how far a reindex has come (``status``) and whether a configured model that differs
from the collection's is the other side of one (:func:`explains`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from indexer.collection.aliases import PREVIOUS_MODEL, VECTORS, raw_store, vectors_name
from indexer.core.normalization import Normalization, choose_normalization
from indexer.errors import IndexerError
from indexer.state.database import CollectionRecord, StateStore
from indexer.state.transfer import count_files

if TYPE_CHECKING:
    from indexer.ports import Embedder, VectorStore

logger = logging.getLogger(__name__)

JOB = "job.json"


@dataclass(frozen=True)
class Job:
    collection: str
    model_spec: str
    model_path: str
    model_id: str
    normalization: str  # Normalization value
    dimensions: int
    target: str  # new store collection
    source: str  # store collection of the old vectors
    started_at: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ReindexReport:
    collection: str
    model: str
    old_model: str
    first_pass: dict[str, object]
    catch_up: dict[str, object]
    switched: bool
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def job_dir(data_dir: str | Path, name: str) -> Path:
    return Path(data_dir) / "reindex" / name


def load_job(data_dir: str | Path, name: str) -> Job | None:
    path = job_dir(data_dir, name) / JOB
    if not path.exists():
        return None
    try:
        return Job(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as exc:
        raise IndexerError(f"unreadable reindex job {path}: {exc}; run `indexer reindex --abort`") from exc


def save_job(data_dir: str | Path, job: Job) -> None:
    folder = job_dir(data_dir, job.collection)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / JOB).write_text(json.dumps(job.to_dict(), indent=2))


def progress(data_dir: str | Path, name: str, state: StateStore) -> dict[str, Any] | None:
    """What ``status`` shows while a reindex is under way."""
    job = load_job(data_dir, name)
    if job is None:
        return None
    shadow_file = job_dir(data_dir, name) / "state.sqlite"
    done = count_files(shadow_file, name) if shadow_file.exists() else 0
    total = len(state.files(name))
    return {
        "model": job.model_spec,
        "model_id": job.model_id,
        "files_done": done,
        "files_total": total,
        "started_at": job.started_at,
        "target": job.target,
    }


def explains(rec: CollectionRecord | None, data_dir: str | Path, asked_model_path: str) -> bool:
    """Whether a configured model that differs from the collection's is the other side of a reindex: the target
    of one under way, or the model the last one switched away from. Such a setting is tolerated (logged), so a
    server configured with either model keeps answering across the switch; the collection's own model embeds."""
    if rec is None:
        return False
    asked = os.path.realpath(asked_model_path)
    candidates = [rec.store_options.get(PREVIOUS_MODEL)]
    job = load_job(data_dir, rec.name)
    if job is not None:
        candidates.append(job.model_path)
    if any(c and os.path.realpath(str(c)) == asked for c in candidates):
        logger.info("collection %s uses %s; the configured %s is the other side of a reindex", rec.name,
                    rec.model_path, asked_model_path)
        return True
    return False


def record_for(job: Job, live: CollectionRecord) -> CollectionRecord:
    """The collection's record once the job's vectors are switched in."""
    return CollectionRecord(
        name=live.name,
        store=live.store,
        store_options={**live.store_options, VECTORS: job.target, PREVIOUS_MODEL: live.model_path},
        metric=live.metric,
        model_id=job.model_id,
        model_path=job.model_path,
        normalization=Normalization.parse(job.normalization),
        dimensions=job.dimensions,
        created_at=live.created_at,
    )


def new_job(live: CollectionRecord, store: VectorStore, model_spec: str, embedder: Embedder, model_path: str) -> Job:
    normalization = choose_normalization(embedder.similarity, live.metric)
    return Job(
        collection=live.name,
        model_spec=model_spec,
        model_path=model_path,
        model_id=embedder.model_id,
        normalization=Normalization.parse(normalization).value,
        dimensions=embedder.dimensions,
        target=_target_name(live, store),
        source=vectors_name(live),
        started_at=time.time(),
    )


def _target_name(live: CollectionRecord, store: VectorStore) -> str:
    """A store collection name for the new vectors that is neither the live one nor any existing one.

    A timestamp alone is not enough: two reindexes within one second would name the live vectors as their
    target, and an abort would then drop them."""
    current = vectors_name(live)
    raw = raw_store(store)
    while True:
        target = f"{live.name}__{time.strftime('%Y%m%d%H%M%S')}_{secrets.token_hex(3)}"
        if target != current and raw.collection_meta(target) is None:
            return target
