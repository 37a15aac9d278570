"""The one check ``indexer index`` and ``indexer status`` share: how much of the collection's text its model
barely reads (:mod:`indexer.models.coverage`), on a bounded sample of its stored chunks. ``status`` says it while
it holds; ``index`` says it once: again only when the model or the share (in tenths) changed since it last did
(``<data_dir>/blind-spots/<collection>.json``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from indexer.collection.parts import CollectionParts
from indexer.models.coverage import Reading, advice, measure, sample
from indexer.ports import PayloadScan

logger = logging.getLogger(__name__)


def check(parts: CollectionParts, name: str) -> tuple[Reading, str | None]:
    """(the reading, the sentence to say when the model barely reads much of it, else None)."""
    rec, store = parts.record, parts.store
    if rec is None or not rec.model_path or not isinstance(store, PayloadScan):
        return Reading(), None
    try:
        texts = sample(store.payloads(name), store.count(name))
        reading = measure(texts, rec.model_path)
    except Exception as exc:  # a hint only: never fail an index run or a status for it
        logger.debug("could not measure what the model reads of %s: %s", name, exc)
        return Reading(), None
    return reading, advice(reading, name, rec.model_path)


def say_once(parts: CollectionParts, name: str) -> str | None:
    """The sentence for ``index`` to say, when it was not said already for this model and share."""
    reading, said = check(parts, name)
    rec = parts.record
    marker = _marker(parts, name)
    if said is None or rec is None:
        marker.unlink(missing_ok=True)
        return None
    key = {"model": rec.model_id, "share": round(reading.share, 1)}
    try:
        if json.loads(marker.read_text(encoding="utf-8")) == key:
            return None
    except (OSError, ValueError):
        pass
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(key), encoding="utf-8")
    except OSError as exc:  # said again next time: no harm
        logger.debug("cannot record %s: %s", marker, exc)
    return said


def forget(parts: CollectionParts, name: str) -> None:
    """Drop what ``index`` said (the collection is dropped: a new one of that name is told again)."""
    _marker(parts, name).unlink(missing_ok=True)


def _marker(parts: CollectionParts, name: str) -> Path:
    return Path(parts.settings.data_dir) / "blind-spots" / f"{name}.json"
