"""int8 rows by id in RAM: the reorder stage of FAISS's ``pq`` codes (plugins/faiss/index.py).

A fast-scan PQ search ranks by 4-bit codes: coarse among near-duplicates. Its ``depth x k`` candidates are reordered
by these rows (the vectors times the index's one scale, rounded to int8: 1 byte a dimension), and only the best
``2 x k`` are read from the sidecar as floats. Looking rows up through FAISS (``IndexIDMap2`` over an int8
``IndexScalarQuantizer``, ``reconstruct_batch``) cost ~2.7 us a row at 1M on an AMD EPYC Zen 3 (0.43 ms for 160
candidates, a fifth of the scan); a binary search of 320 ids in a sorted million took ~0.29 ms of a search right
after the scan (random reads of RAM: 20 steps an id), and FAISS's hash map (``MapLong2Long``, one C call for all
the candidates) a fraction of it (docs/benchmarks.md#recall-session-16).

Layout: ``rows`` by slot (append-only, grown by doubling) and ``slot_id`` beside them (the id a slot holds, -1 once
removed); the map sends an id to its slot. A removal marks the slot (the map cannot forget an id: a stale entry is
told by its slot no longer holding the id) and leaves the row as garbage, compacted away when garbage passes a
quarter of the live rows, the map built again. Serialized live rows only, in id order.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

# isort: split
import faiss

_COUNT = struct.Struct("<QI")  # rows, dimension
_MAP_ENTRY_BYTES = 40  # an entry of the map (std::unordered_map<int64, int64>: a node and its bucket), for nbytes


class Int8Rows:
    """int8 rows keyed by int64 id (never negative: FAISS's label -1 is "no result", and -1 marks garbage here)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.rows = np.zeros((0, dim), dtype=np.int8)  # by slot; capacity >= used
        self.slot_id = np.zeros(0, dtype=np.int64)  # the id in each slot (-1: garbage); the same capacity
        self.used = 0  # slots taken (live rows and garbage)
        self.live = 0
        # id -> slot (entries of removed ids stay until a compaction); Any: its Python methods take arrays
        self._map: Any = faiss.MapLong2Long()

    def __len__(self) -> int:
        return self.live

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.slot_id.nbytes + _MAP_ENTRY_BYTES * self.used)

    def _slots(self, ids: np.ndarray) -> np.ndarray:
        """The slot of each id; -1 where the id is not here."""
        if not self.live or not len(ids):
            return np.full(len(ids), -1, dtype=np.int64)
        slots = self._map.search_multiple(ids)
        hit = np.flatnonzero(slots >= 0)
        slots[hit[self.slot_id[slots[hit]] != ids[hit]]] = -1  # removed since: the slot no longer holds it
        return slots

    def remove(self, ids: np.ndarray) -> None:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        slots = self._slots(ids)
        gone = np.unique(slots[slots >= 0])
        if not len(gone):
            return
        self.slot_id[gone] = -1
        self.live -= len(gone)
        if self.used - self.live > max(1024, self.live // 4):
            self._compact()

    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Add ``rows`` (int8, one per id) under ``ids``; an id already present is replaced (the last one wins
        among repeated ids)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int8).reshape(len(ids), self.dim)
        if not len(ids):
            return
        if ids.min() < 0:
            raise ValueError("int8 rows: a negative id (FAISS ids are 63-bit, never negative)")
        _unique, last = np.unique(ids[::-1], return_index=True)  # each id at its last occurrence
        pick = len(ids) - 1 - last
        ids, rows = ids[pick], rows[pick]
        self.remove(ids)
        need = self.used + len(ids)
        if need > len(self.rows):
            size = max(need, 2 * len(self.rows), 1024)
            grown = np.zeros((size, self.dim), dtype=np.int8)
            grown[: self.used] = self.rows[: self.used]
            self.rows = grown
            self.slot_id = np.concatenate([self.slot_id[: self.used], np.full(size - self.used, -1, np.int64)])
        self.rows[self.used : need] = rows
        self.slot_id[self.used : need] = ids
        self._map.add(ids, np.arange(self.used, need, dtype=np.int64))
        self.used = need
        self.live += len(ids)

    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows of the ids present, as int8; the mask of ``ids`` present)."""
        slots = self._slots(np.ascontiguousarray(ids, dtype=np.int64))
        there = slots >= 0
        return self.rows[slots[there]], there

    def _live_slots(self) -> np.ndarray:
        return np.flatnonzero(self.slot_id[: self.used] >= 0)

    def _compact(self) -> None:
        slots = self._live_slots()
        self._fill(self.slot_id[slots], self.rows[slots])

    def _fill(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Hold exactly ``rows`` under ``ids`` (distinct), in slots 0..n-1."""
        self.rows = np.ascontiguousarray(rows, dtype=np.int8)
        self.slot_id = np.ascontiguousarray(ids, dtype=np.int64).copy()
        self.used = self.live = len(ids)
        self._map = faiss.MapLong2Long()
        if len(ids):
            self._map.add(self.slot_id, np.arange(len(ids), dtype=np.int64))

    def to_bytes(self) -> bytes:
        slots = self._live_slots()
        slots = slots[np.argsort(self.slot_id[slots], kind="stable")]
        ids = self.slot_id[slots]
        return _COUNT.pack(len(ids), self.dim) + ids.astype("<i8").tobytes() + self.rows[slots].tobytes()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, dim: int) -> Int8Rows:
        """The rows ``to_bytes`` wrote; ValueError when the bytes do not hold them for ``dim``."""
        if len(data) < _COUNT.size:
            raise ValueError("int8 rows: truncated header")
        n, stored_dim = _COUNT.unpack_from(data, 0)
        if stored_dim != dim or len(data) != _COUNT.size + n * (8 + dim):
            raise ValueError(f"int8 rows: {n} rows of {stored_dim} in {len(data)} bytes, expected dimension {dim}")
        ids = np.frombuffer(data, dtype="<i8", count=n, offset=_COUNT.size).astype(np.int64)
        if n and not (np.diff(ids) > 0).all():
            raise ValueError("int8 rows: ids not sorted")
        if n and ids[0] < 0:
            raise ValueError("int8 rows: a negative id")
        out = cls(dim)
        out._fill(ids, np.frombuffer(data, dtype=np.int8, offset=_COUNT.size + 8 * n).reshape(n, dim).copy())
        return out
