"""Agreement between state and store (docs/architecture.md): the state is the truth of what should be indexed,
the store must hold exactly the points committed chunks own.

:func:`health` compares every id (``indexer status``); :func:`agreement` is the cheap check readiness and
searches use (three counts and the repair marker); :func:`search_warning` is that check at most every
``AGREEMENT_EVERY_S`` seconds per collection.
"""

from __future__ import annotations

import time
from typing import Any

from indexer.collection.parts import CollectionParts
from indexer.errors import NotFoundError

AGREEMENT_EVERY_S = 2.0  # how stale a search's view of state/store agreement may be


def health(parts: CollectionParts) -> dict[str, Any]:
    """Whether the store holds exactly the points the state says: counts, missing and orphaned points."""
    rec = parts.record
    name = parts.name
    if rec is None:
        raise NotFoundError.collection(name)
    state_ids = parts.state.point_ids(name)
    if parts.store.collection_meta(name) is None:
        return {"ok": False, "store_points": 0, "state_points": len(state_ids), "missing_points": len(state_ids),
                "orphan_points": 0, "problem": f"the store is missing ({parts.store_location(rec)}); "
                f"`indexer index -c {name}` rebuilds it"}
    store_ids = parts.store.list_ids(name)
    pending = set(parts.state.pending_ids(name))
    missing = len(state_ids - store_ids)
    orphans = len(store_ids - state_ids - pending)
    problem = None
    if missing or orphans:
        problem = (
            f"the store holds {len(store_ids)} points, the state expects {len(state_ids)} ({missing} missing, "
            f"{orphans} not owned by any file); `indexer index -c {name}` repairs it"
        )
    return {"ok": problem is None, "store_points": len(store_ids), "state_points": len(state_ids),
            "missing_points": missing, "orphan_points": orphans, "problem": problem}


def agreement(parts: CollectionParts) -> str | None:
    """:func:`agreement_now`, remembered for the searches that follow."""
    problem = agreement_now(parts)
    parts.agreement_seen = (time.monotonic(), problem)  # what searches say, until the next look
    return problem


def agreement_now(parts: CollectionParts) -> str | None:
    """None when the store holds as many points as the state's committed chunks own, give or take the ids of
    a write in flight (recorded as pending until its commit); else the problem and its repair. A store being
    refilled after a loss is short by far more than that. Cheap (three counts), unlike :func:`health`, which
    compares every id: readiness and searches ask this."""
    rec = parts.require_record()
    name, state, store = parts.name, parts.state, parts.store
    if store.collection_meta(name) is None:
        return (
            f"the {rec.store} store of collection {name!r} is missing ({parts.store_location(rec)}); "
            f"the next sync (`indexer index -c {name}`, or the server's watcher) rebuilds it"
        )
    if parts.repair_marker().exists():
        held, expected = store.count(name), state.count_points(name)
        return (
            f"the store of collection {name!r} is being repaired ({held} of {expected} points back); "
            "searches miss the rest until the repair's sync completes"
        )
    before = state.change_mark()
    in_flight = state.count_pending(name)  # a batch between its first write and its commit
    expected = state.count_points(name)
    held = store.count(name)
    if abs(held - expected) <= in_flight or state.change_mark() != before:  # a commit in between
        return None
    return (
        f"the store of collection {name!r} holds {held} points, the state expects {expected}; the next "
        f"sync (`indexer index -c {name}`, or the server's watcher) repairs it"
    )


def search_warning(parts: CollectionParts) -> str | None:
    """:func:`agreement` for searches, asked at most every ``AGREEMENT_EVERY_S`` seconds per collection."""
    seen = parts.agreement_seen
    if seen is None or time.monotonic() - seen[0] >= AGREEMENT_EVERY_S:
        agreement(parts)
        seen = parts.agreement_seen
    assert seen is not None
    problem = seen[1]
    return f"the hits may be incomplete: {problem}" if problem else None
