"""The in-memory FAISS index of one collection and its on-disk cache file.

Flat: ``IndexIDMap2(IndexFlatIP | IndexFlatL2)`` labelled by the point's int64 id; removal is real.
Auto (the default): flat while the collection is small; from ``AutoParams.switch_at`` live vectors on, an
``IndexIVFScalarQuantizer`` (IVF lists, 8-bit codes: ~4x less memory than flat, sub-linear search) labelled by
the point's id, so removal stays real. The codes (``AutoParams.codes``): ``int8`` (the default) stores every
vector times one scale for all dimensions (127 over the largest component of the training sample), rounded and
clipped to int8, and searches with the query rounded to int8 too, so FAISS scores integer dot products
(``QT_8bit_direct_signed``, its byte-domain kernels): 1.5-2x less scan time than ``sq8`` at the same lists, and
its recall once the float rescoring reorders the candidates (2 x k by default; near-duplicate versions at 1M took
4 x k, which the tuning chose: docs/benchmarks.md#int8-codes);
``sq8`` is FAISS's ``SQ8`` (a range per dimension, decoded to floats for every point scanned); ``pq`` (chosen by
the recall tuning when int8 codes cannot reach its floor within the latency budget: plugins/faiss/recall.py) scans
4-bit product-quantizer codes of each vector's residual from its list's centroid with FAISS's fast-scan kernels
(``IVF{lists},PQ{d/2}x4fs``: :func:`pq_subquantizers`; as many lists as int8's, visited in FAISS's order or a
grouped one when the tuning finds it pays: plugins/faiss/routing.py),
reorders ``PQ_WIDEN`` times the candidates the float rescoring reads (2 x k by default, the tuned depth after) by
int8 rows kept by id in RAM (plugins/faiss/rows.py), and hands the float rescoring the best of them: on
boilerplate at 1M, 0.979 at p50 2.8 ms with the grouped order where int8 reached 0.930 at 3.9 ms within the
latency budget (docs/benchmarks.md#recall-session-15).
The switch (and a retrain when the collection has grown 4x since the lists were trained, or the way back to flat
when it shrinks below half the threshold) is a rebuild from the sidecar's exact vectors, done by the writer that
crosses the threshold; other processes keep searching their loaded index until they see the new cache file.
HNSW: ``IndexHNSWFlat`` labelled by slot (insertion position); a slot -> id array marks replaced or deleted
slots with -1 (tombstones), which a selector excludes at search time; the index is rebuilt from its live
vectors when tombstones pass a threshold.

Cache file format (little-endian): magic ``LIXFAISS``, u32 version, u64 sequence, u8 kind, u64 index bytes,
u64 slot bytes, u32 crc32 of the rest; then the serialized index, then the slot array (HNSW only). It is
written to a temporary file, fsynced, renamed over the old one and the directory fsynced. Kind ``ivf-int8``
(int8 codes) ends with the scale (f64) in place of the slot array; kind ``ivf-pq`` with the scale and the int8
rows (u64 count, u32 dimension, the sorted ids as i64, the rows).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from plugins.faiss.routing import GroupedLists, search_lists
from plugins.faiss.rows import Int8Rows

_faiss: Any = faiss  # the bundled stubs lack the search-parameter classes

logger = logging.getLogger(__name__)

MAGIC = b"LIXFAISS"
VERSION = 1
_HEADER = struct.Struct("<8sIQBQQI")
KINDS = ("flat", "hnsw", "auto")  # what a collection asks for
_FILE_KINDS = ("flat", "hnsw", "ivf", "ivf-int8", "ivf-pq")  # what a cache file holds (auto is flat or ivf)
CODES = ("int8", "sq8", "pq")  # the codes of IVF lists (module docstring)
PQ_WIDEN = 16  # pq codes: the scan's candidates for the int8 reorder, per candidate the float rescoring reads
_SCALE = struct.Struct("<d")


@dataclass(frozen=True)
class HnswParams:
    m: int = 32
    ef_construction: int = 100
    ef_search: int = 128
    rebuild_ratio: float = 0.25  # rebuild when tombstones exceed this share of the slots
    exact_below: int = 10_000  # searches over fewer live (and matching) vectors are exact brute force


@dataclass(frozen=True)
class AutoParams:
    switch_at: int = 100_000  # live vectors from which the auto kind uses IVF lists
    nprobe: int = 64  # lists visited per query (of 1,024-16,384)
    exact_below: int = 20_000  # filtered searches over fewer matching vectors are exact (done by the store)
    lists: int | None = None  # IVF lists of the next training (a setting, or chosen from the estimate); None: by size
    codes: str = "int8"  # codes of the next training's lists (CODES); a loaded index keeps the codes it was built with


def ivf_lists(n: int) -> int:
    """Number of IVF lists for ``n`` vectors: the power of two nearest 4 sqrt(n) (4,096 at a million), with at
    least 39 training vectors per list, in 8..16,384."""
    target = min(4 * max(n, 1) ** 0.5, max(n, 1) / 39)
    lists = 2 ** round(math.log2(max(target, 1)))
    while lists > 8 and lists * 39 > n:
        lists //= 2
    return int(min(max(lists, 8), 16_384))


def pq_subquantizers(dim: int) -> int:
    """Sub-quantizers of ``pq`` codes for ``dim``: 2 dimensions each (192 at 384), else 3, else 4; an even count
    (fast-scan blocks); 0 when none fits (pq codes unavailable: the lists keep int8)."""
    for per in (2, 3, 4):
        if dim % per == 0 and (dim // per) % 2 == 0:
            return dim // per
    return 0


class VectorIndex:
    """Vectors by int64 id; ``ip`` selects inner product (else squared L2)."""

    def __init__(
        self, kind: str, dim: int, ip: bool, hnsw: HnswParams, seq: int = 0, auto: AutoParams | None = None
    ) -> None:
        self.kind = kind
        self.dim = dim
        self.ip = ip
        self.hnsw = hnsw
        self.auto = auto or AutoParams()
        self.seq = seq
        self.slot_iid = np.zeros(0, dtype=np.int64)
        self.dead = 0
        self.structure = "hnsw" if kind == "hnsw" else "flat"  # what is built now: flat, hnsw or ivf
        self.trained_on = 0  # vectors the IVF lists were trained for
        self.tuned: int | None = None  # the search-time parameter (nprobe, efSearch) chosen from recall, if any
        self.scale = 0.0  # int8 codes: the factor from float components to the stored integers (0: other codes)
        self.index: Any = self._empty()  # IndexIDMap2, IndexIVFScalarQuantizer or IndexHNSWFlat
        self.rows: Int8Rows | None = None  # pq codes: the int8 rows by id that reorder the scan's candidates
        self.grouped = 0.0  # pq codes over inner products: the grouped list order's lambda when tuned (0: FAISS's)
        self._groups: GroupedLists | None = None  # that order over the trained centroids (built on first use)

    @classmethod
    def build(
        cls, kind: str, dim: int, ip: bool, hnsw: HnswParams, ids: np.ndarray, vectors: np.ndarray, seq: int = 0,
        auto: AutoParams | None = None,
    ) -> VectorIndex:
        """A new index holding ``vectors`` under ``ids``; the auto kind picks flat or IVF by their number."""
        out = cls(kind, dim, ip, hnsw, seq, auto)
        if kind == "auto" and len(ids) >= out.auto.switch_at:
            out._train_ivf(vectors)
        out.apply(np.zeros(0, dtype=np.int64), ids, vectors)
        return out

    def _train_ivf(self, vectors: np.ndarray) -> None:
        n = len(vectors)
        lists = min(self.auto.lists, max(8, n // 39)) if self.auto.lists else self._lists_for(n)
        metric = faiss.METRIC_INNER_PRODUCT if self.ip else faiss.METRIC_L2
        pq = self.auto.codes == "pq" and pq_subquantizers(self.dim) > 0  # 4-bit fast-scan codes of residuals
        int8 = self.auto.codes == "int8" or pq  # pq keeps int8 rows beside its codes (one scale)
        codes = f"PQ{pq_subquantizers(self.dim)}x4fs" if pq else "SQ8_direct_signed" if int8 else "SQ8"
        index: Any = faiss.index_factory(self.dim, f"IVF{lists},{codes}", metric)
        sample = vectors
        if n > 40 * lists:
            pick = np.random.default_rng(1234).choice(n, size=40 * lists, replace=False)
            sample = vectors[np.sort(pick)]
        sample = np.ascontiguousarray(sample, dtype=np.float32)
        if int8:  # one scale for every dimension: codes are the vectors themselves, not residuals of their lists
            index.by_residual = pq  # (pq: its codes encode each vector's residual from its list's centroid)
            top = float(np.abs(sample).max()) if len(sample) else 0.0
            self.scale = 127.0 / top if math.isfinite(top) and top > 0 else 1.0
        else:
            self.scale = 0.0
        index.train(sample * self.scale if int8 and not pq else sample)  # the lists in the codes' space (L2)
        index.nprobe = min(self.auto.nprobe, lists)
        self.rows = None
        if pq:
            self.rows = Int8Rows(self.dim)
        logger.info("trained IVF index: %d lists (%s codes) on %d of %d vectors", lists, self.auto.codes,
                    len(sample), n)
        self.index = index
        self._groups = None
        self.structure = "ivf"
        self.trained_on = n

    def wants_rebuild(self) -> bool:
        """For the auto kind: whether the size crossed into another structure, or outgrew its IVF training: 4x the
        vectors it was trained on, or (lists by size) past the size that :func:`ivf_lists` gives more lists (2,048
        -> 4,096 at 524,288 vectors). Measured at 1M on the versions set (docs/stores.md#recall-that-holds): 4,096
        lists reach recall 0.995 at 0.79 ms where the 2,048 trained at 405k gave 0.991 at 1.31 ms (nprobe 64,
        rescoring 2 x k); with the 4x rule alone a million points were searched on 2,048."""
        if self.kind != "auto":
            return False
        live = self.live
        if self.structure == "flat":
            return live >= self.auto.switch_at
        if live < self.auto.switch_at // 2 or live > 4 * self.trained_on:
            return True
        return not self.auto.lists and self._lists_for(live) > self.lists()

    @property
    def codes(self) -> str:
        """The codes of the IVF lists built now ("" for other structures)."""
        if self.structure != "ivf":
            return ""
        return "pq" if self.rows is not None else "int8" if self.scale else "sq8"

    @property
    def rescore(self) -> int:
        """The rescoring depth of searches the tuning has not chosen one for (x k candidates rescored with the float
        vectors): 2 over int8 codes, whose integer scores order close neighbours more coarsely than SQ8's (at 2 x k
        they find more than SQ8 without rescoring, in less time: docs/benchmarks.md#int8-codes), else 1."""
        return 2 if self.structure == "ivf" and self.scale else 1

    def _lists_for(self, n: int) -> int:
        """The IVF lists a training on ``n`` vectors chooses by size, whatever the codes (pq codes over a quarter of
        them, for fuller fast-scan blocks, cost as much for the same recall in FAISS's order and gain less from the
        grouped one: docs/benchmarks.md#recall-session-15)."""
        return ivf_lists(n)

    def _int8(self, vectors: np.ndarray) -> np.ndarray:
        """``vectors`` as the int8 codes store them: times the scale, rounded, clipped (as float32 for FAISS)."""
        return np.clip(np.rint(np.asarray(vectors, dtype=np.float32) * self.scale), -128, 127).astype(np.float32)

    def lists(self) -> int:
        """IVF lists of the index (0 for other structures)."""
        return int(faiss.extract_index_ivf(self.index).nlist) if self.structure == "ivf" else 0

    def _empty(self) -> faiss.Index:
        metric = faiss.METRIC_INNER_PRODUCT if self.ip else faiss.METRIC_L2
        if self.kind in ("flat", "auto"):
            base = faiss.IndexFlatIP(self.dim) if self.ip else faiss.IndexFlatL2(self.dim)
            return faiss.IndexIDMap2(base)
        index = faiss.IndexHNSWFlat(self.dim, self.hnsw.m, metric)
        index.hnsw.efConstruction = self.hnsw.ef_construction
        index.hnsw.efSearch = self.hnsw.ef_search
        return index

    @property
    def live(self) -> int:
        return int(self.index.ntotal) - self.dead

    # --- mutation --------------------------------------------------------------------------------
    def apply(self, touched: np.ndarray, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Remove every id in ``touched`` (if present), then add ``vectors`` under ``ids``."""
        if self.structure in ("flat", "ivf"):
            if len(touched):
                self.index.remove_ids(faiss.IDSelectorBatch(np.ascontiguousarray(touched, dtype=np.int64)))
                if self.rows is not None:
                    self.rows.remove(touched)
            if len(ids):
                ids = np.ascontiguousarray(ids, dtype=np.int64)
                if self.rows is not None:  # the scan's codes from the floats, the reorder's rows as int8
                    self.index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)
                    self.rows.add(ids, self._int8(vectors))
                    return
                stored = self._int8(vectors) if self.scale else np.ascontiguousarray(vectors, dtype=np.float32)
                self.index.add_with_ids(stored, ids)
            return
        if len(touched) and len(self.slot_iid):
            mask = np.isin(self.slot_iid, touched) & (self.slot_iid >= 0)
            self.dead += int(mask.sum())
            self.slot_iid[mask] = -1
        if len(ids):
            self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))
            self.slot_iid = np.concatenate([self.slot_iid, ids.astype(np.int64)])
        if self.dead > max(1000, self.hnsw.rebuild_ratio * self.index.ntotal):
            self.compact()

    def compact(self) -> None:
        """Rebuild an HNSW index from its live vectors (drops tombstones)."""
        if self.kind != "hnsw":
            return
        alive = np.nonzero(self.slot_iid >= 0)[0]
        vectors = self._stored()[alive].copy()
        ids = self.slot_iid[alive].copy()
        logger.info("rebuilding HNSW index: %d live vectors, %d tombstones", len(ids), self.dead)
        self.index = self._empty()
        self.slot_iid = np.zeros(0, dtype=np.int64)
        self.dead = 0
        if len(ids):
            self.index.add(vectors)
            self.slot_iid = ids

    def _stored(self) -> np.ndarray:
        storage: Any = faiss.downcast_index(self.index.storage)
        n = int(self.index.ntotal)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return faiss.rev_swig_ptr(storage.get_xb(), n * self.dim).reshape(n, self.dim)

    # --- search ----------------------------------------------------------------------------------
    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None, excluded: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(raw distances, ids) best first: inner products, or squared L2 distances; only ``allowed`` ids (None:
        all), never ``excluded`` ones (points written but not committed), both inside FAISS's search."""
        q = np.ascontiguousarray(query.reshape(1, self.dim), dtype=np.float32)
        if self.index.ntotal == 0 or k <= 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        if excluded is not None and not len(excluded):
            excluded = None
        if self.structure == "ivf":
            return self._search_ivf(q, k, allowed, excluded)
        if self.structure == "flat":
            params = None
            selector: Any = None  # kept referenced until the search returns
            if allowed is not None:
                if len(allowed) == 0:
                    return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
                selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
            selector = _excluding(selector, excluded)
            if selector is not None:
                params = _faiss.SearchParameters(sel=_sel(selector))
            dist, labels = self.index.search(q, k, params=params)
            del selector
            keep = labels[0] >= 0
            return dist[0][keep], labels[0][keep]
        mask = self.slot_iid >= 0
        if allowed is not None:
            mask &= np.isin(self.slot_iid, allowed)
        if excluded is not None:
            mask &= ~np.isin(self.slot_iid, excluded)
        n_match = int(mask.sum())
        if n_match == 0:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        if n_match <= self.hnsw.exact_below or k * 4 >= n_match:
            return self._exact(q[0], k, np.nonzero(mask)[0])
        # Excluded nodes (tombstones, filtered out) still cost visits: widen the beam in proportion.
        ef = max(self.tuned or self.hnsw.ef_search, k) * len(mask) / n_match
        params = _faiss.SearchParametersHNSW(efSearch=int(min(ef, max(4096, k))))
        bitmap = np.packbits(mask, bitorder="little")
        bitmap_sel = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bitmap))  # referenced until return
        if n_match < len(mask):
            params.sel = bitmap_sel
        dist, slots = self.index.search(q, k, params=params)
        del bitmap_sel, bitmap
        keep = slots[0] >= 0
        return dist[0][keep], self.slot_iid[slots[0][keep]]

    def _search_ivf(
        self, q: np.ndarray, k: int, allowed: np.ndarray | None, excluded: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        selector: Any = None
        if allowed is not None:
            if len(allowed) == 0:
                return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
            selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
        selector = _excluding(selector, excluded)
        # at most every list: FAISS's fast scan over residuals returns garbage (scores ~2e31) beyond nlist
        params = _faiss.SearchParametersIVF(nprobe=min(self.tuned or self.auto.nprobe, self.lists()))
        if selector is not None:
            params.sel = _sel(selector)
        if self.rows is not None:
            return self._search_pq(q, k, params, selector)
        unit = 1.0
        if self.scale:  # FAISS's byte-domain kernels take the query as integers too
            if self.ip:  # its own scale (the ranking does not depend on it), for the most precision
                top = float(np.abs(q).max())
                unit = 127.0 / top if math.isfinite(top) and top > 0 else 1.0
                q = np.rint(q * unit).astype(np.float32)
                unit *= self.scale
            else:  # squared L2 needs the query on the stored vectors' scale
                q = self._int8(q)
                unit = self.scale * self.scale
        dist, labels = self.index.search(q, k, params=params)
        del selector
        keep = labels[0] >= 0
        return dist[0][keep] / np.float32(unit), labels[0][keep]

    def _search_pq(self, q: np.ndarray, k: int, params: Any, selector: Any) -> tuple[np.ndarray, np.ndarray]:
        """pq codes: the best ``k`` of the fast scan's ``PQ_WIDEN x k`` candidates by their int8 rows (scores in
        float units: the ranking the float rescoring refines)."""
        self.index.implem = 11  # FAISS's reservoir: 9 % less than its default (benchmarks.md#recall-session-14)
        if self.grouped and self.ip:  # the lists in the grouped order (plugins/faiss/routing.py)
            if self._groups is None:
                self._groups = GroupedLists.of(self.index)
            lists, coarse = self._groups.probe(q[0], params.nprobe, self.grouped)
            _dist, labels = search_lists(self.index, q, k * PQ_WIDEN, lists, coarse, params)
        else:
            _dist, labels = self.index.search(q, k * PQ_WIDEN, params=params)
        del selector
        found = labels[0][labels[0] >= 0]
        if not len(found):
            return np.zeros(0, dtype=np.float32), found
        assert self.rows is not None
        rows, there = self.rows.get(found)
        found = found[there]  # (every candidate has its row: both are written together)
        rows = rows.astype(np.float32) * np.float32(1.0 / self.scale)
        raw = rows @ q[0] if self.ip else ((rows - q[0]) ** 2).sum(axis=1)
        order = np.argsort(-raw if self.ip else raw, kind="stable")[:k]
        return raw[order].astype(np.float32), found[order]

    def approximate(self) -> tuple[str, int, int] | None:
        """(name, value now, most worth trying) of the search-time parameter of an approximate search; None when
        an unfiltered search is exact (flat, or HNSW over at most ``exact_below`` live vectors)."""
        if self.structure == "ivf":
            return "nprobe", self.tuned or self.auto.nprobe, max(self.lists(), self.auto.nprobe)
        if self.structure == "hnsw" and self.live > self.hnsw.exact_below:
            return "efSearch", self.tuned or self.hnsw.ef_search, 16 * self.hnsw.ef_search
        return None

    def memory_bytes(self) -> int:
        """Bytes the index occupies when serialized (a close measure of its memory)."""
        rows = self.rows.nbytes if self.rows is not None else 0
        return int(faiss.serialize_index(self.index).nbytes) + int(self.slot_iid.nbytes) + rows

    def _exact(self, q: np.ndarray, k: int, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        vectors = self._stored()[slots]
        if self.ip:
            raw = vectors @ q
            order = np.argsort(-raw, kind="stable")[:k]
        else:
            raw = ((vectors - q) ** 2).sum(axis=1)
            order = np.argsort(raw, kind="stable")[:k]
        return raw[order].astype(np.float32), self.slot_iid[slots[order]]

    # --- cache file ------------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the cache atomically: temp file, fsync, rename, fsync directory."""
        blob = faiss.serialize_index(self.index)
        slots = self.slot_iid.astype("<i8").tobytes() if self.kind == "hnsw" else b""
        structure = self.structure
        if structure == "ivf" and self.rows is not None:
            structure = "ivf-pq"
            slots = _SCALE.pack(self.scale) + self.rows.to_bytes()
        elif structure == "ivf" and self.scale:
            structure, slots = "ivf-int8", _SCALE.pack(self.scale)
        crc = zlib.crc32(slots, zlib.crc32(blob.data))
        kind_no = _FILE_KINDS.index(structure)
        header = _HEADER.pack(MAGIC, VERSION, self.seq, kind_no, blob.nbytes, len(slots), crc)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(blob.data)
                f.write(slots)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    @staticmethod
    def cached_seq(path: Path) -> int:
        """The sequence the cache file at ``path`` reflects (0 when missing or unreadable)."""
        try:
            with open(path, "rb") as f:
                magic, version, seq, *_ = _HEADER.unpack(f.read(_HEADER.size))
        except (OSError, struct.error):
            return 0
        return int(seq) if magic == MAGIC and version == VERSION else 0

    @classmethod
    def load(
        cls, path: Path, kind: str, dim: int, ip: bool, hnsw: HnswParams, auto: AutoParams | None = None
    ) -> VectorIndex | None:
        """The cached index, or None when missing, corrupt or made for other settings."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cannot read FAISS cache %s (%s); rebuilding from the sidecar", path, exc)
            return None
        try:
            magic, version, seq, kind_no, n_index, n_slots, crc = _HEADER.unpack_from(data)
            body = memoryview(data)[_HEADER.size :]
            if magic != MAGIC or version != VERSION or len(body) != n_index + n_slots:
                raise ValueError("bad header or length")
            structure = _FILE_KINDS[kind_no]
            scale = _SCALE.unpack_from(body, n_index)[0] if structure in ("ivf-int8", "ivf-pq") else 0.0
            rows = None
            if structure == "ivf-pq":
                rows = Int8Rows.from_bytes(memoryview(body)[n_index + _SCALE.size :], dim)
            if structure in ("ivf-int8", "ivf-pq"):
                structure = "ivf"
                if not (math.isfinite(scale) and scale > 0):
                    raise ValueError(f"int8 scale {scale}")
            fits = structure in ("flat", "ivf") if kind == "auto" else structure == kind
            if not fits or zlib.crc32(body) != crc:
                raise ValueError("kind or checksum mismatch")
            index = faiss.deserialize_index(np.frombuffer(body[:n_index], dtype=np.uint8))
            if index.d != dim:
                raise ValueError(f"dimension {index.d} != {dim}")
            if rows is not None and len(rows) != index.ntotal:
                raise ValueError(f"{len(rows)} int8 rows for {index.ntotal} codes")
        except (ValueError, struct.error, IndexError, RuntimeError) as exc:
            logger.warning("FAISS cache %s is unusable (%s); rebuilding from the sidecar", path, exc)
            return None
        out = cls(kind, dim, ip, hnsw, seq, auto)
        out.index = index
        out.structure = structure
        out.scale = scale
        out.rows = rows
        if structure == "ivf":
            _ivf: Any = faiss.extract_index_ivf(index)
            _ivf.nprobe = min(out.auto.nprobe, _ivf.nlist)
            out.trained_on = max(int(index.ntotal), out.auto.switch_at)
        if kind == "hnsw":
            _hnsw: Any = index
            _hnsw.hnsw.efSearch = hnsw.ef_search
            out.slot_iid = np.frombuffer(body[n_index:], dtype="<i8").astype(np.int64)
            out.dead = int((out.slot_iid < 0).sum())
        return out


class _Excluding:
    """A FAISS selector that keeps the ids ``inner`` keeps (all when None) except ``excluded``: the selectors it
    is built from stay referenced as long as it is (SWIG does not keep them alive)."""

    def __init__(self, inner: Any, excluded: np.ndarray) -> None:
        self.batch = faiss.IDSelectorBatch(np.ascontiguousarray(excluded, dtype=np.int64))
        self.inner = inner
        self.not_excluded = faiss.IDSelectorNot(self.batch)
        self.selector = self.not_excluded if inner is None else faiss.IDSelectorAnd(inner, self.not_excluded)


def _excluding(selector: Any, excluded: np.ndarray | None) -> Any:
    """``selector`` (None: every id) without the ``excluded`` ids: an object whose ``.selector`` is the FAISS
    selector (the caller keeps the object referenced until the search returns), or ``selector`` itself."""
    if excluded is None:
        return selector
    return _Excluding(selector, excluded)


def _sel(holder: Any) -> Any:
    return holder.selector if isinstance(holder, _Excluding) else holder
