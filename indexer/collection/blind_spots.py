"""The one check ``indexer index`` and ``indexer status`` share: how much of the collection's text its model
barely reads (:mod:`indexer.models.coverage`), on a bounded sample of its stored chunks."""

from __future__ import annotations

import logging

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
