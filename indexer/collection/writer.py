"""The write face of a collection: index, sync, sync paths, forget and drop, each under the writer lock.

A :class:`CollectionWriter` drives one :class:`~indexer.collection.parts.CollectionParts`. Writers repair (docs/
architecture.md, "Agreement between state and store"): they re-create a missing store collection, re-write
files whose points were lost and delete points no committed chunk owns. It is what a watcher drives (the
:class:`~indexer.watch.watcher.WatchTarget` protocol) and what the server's index thread holds per collection.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from indexer import ports
from indexer.cluster.report import note as cluster_note
from indexer.collection import blind_spots, leftovers, reindex
from indexer.collection.aliases import keep_live
from indexer.collection.cluster_run import ClusterRun
from indexer.collection.parts import CollectionParts, PartsView
from indexer.core.paths import user_path, within
from indexer.errors import InputError, NotFoundError
from indexer.index import batching, large, payloads
from indexer.index.chunking import chunker_for
from indexer.index.pipeline import IndexReport, Pipeline, Progress
from indexer.index.reads import DETACH_SECONDS, ReadAhead
from indexer.index.splitting import SplitRecipe
from indexer.names import encodable, printable
from indexer.ports import Chunker, PayloadScan, Source, lexical_index
from indexer.search.lexical import ANALYZER
from indexer.search.recall import WAIT_S as RECALL_WAIT_S  # a closing writer waits for a measurement in flight
from indexer.search.recall import RecallWatch
from indexer.state.database import CollectionRecord
from indexer.types import Chunk, Document

logger = logging.getLogger(__name__)


class CollectionWriter(PartsView):
    """Writes one collection. ``owns_parts``: closing the writer closes its parts (not when it shares them with
    a reader: a single-process store)."""

    def __init__(self, parts: CollectionParts, *, owns_parts: bool = True) -> None:
        self.parts = parts
        self._owns_parts = owns_parts
        self._reads: ReadAhead | None = None  # files read in threads, kept across calls (indexer.index.reads)
        self._kept = large.KeptWrites()  # large files part-written by the watcher's calls (indexer.index.large)
        self._following = False
        self._sources: dict[str, Source] = {}  # root -> the source sync_paths reads with (its parse workers stay warm)
        st = parts.settings  # the approximate index's recall, measured (and tuned) in the background after writes
        self._recall = RecallWatch(tune=st.recall_tuning, floor=st.recall_floor, sample=st.recall_sample,
                                   interval=st.recall_interval, latency_budget_ms=st.recall_latency_budget_ms)

    def close(self) -> None:
        self._recall.wait(RECALL_WAIT_S)  # a measurement in flight finishes (and records) before the store closes
        if self._reads is not None:
            self._close_reads()
        for source in self._sources.values():
            source.close()
        self._sources.clear()
        if self._owns_parts:
            self.parts.close()

    def follow_reads(self, listener: Callable[[str], None] | None) -> None:
        """Let ``sync_paths`` leave a slow read (a file still being parsed after a batch's time) running in the
        background and return; ``listener(path)`` hears when it ends (the watcher syncs the path again, and
        the finished document is taken). None: every call waits for its reads (the default)."""
        if listener is None:  # the watcher stops: reads left in the background end now (their paths are queued)
            self._kept = large.KeptWrites()  # part-written large files too (the next call's recover deletes them)
            if self._reads is not None:
                self._close_reads()
            self._following = False
            return
        self._read_ahead().listener = listener
        self._following = True

    def _close_reads(self) -> None:
        reads, self._reads = self._reads, None
        if reads is not None:
            reads.close()
            far = reads.far
            if far is not None and hasattr(far, "close"):
                far.close()

    def reading(self) -> list[dict[str, Any]]:
        """Files being read in the background (path, seconds so far): status."""
        return [] if self._reads is None else self._reads.reading()

    def _kept_source(self, root: str) -> Source:
        """The source of ``root`` kept across ``sync_paths`` calls (the watcher's batches): its parse workers stay
        started, so a batch with a document does not start a process first. ``sync_paths`` reads only the
        problems a call adds; the list is emptied first so it never grows."""
        source = self._sources.get(root)
        if source is None:
            source = self._sources[root] = self.parts.source_for(root)
        if isinstance(source.problems, list):
            source.problems.clear()
        return source

    def _read_ahead(self) -> ReadAhead:
        if self._reads is None:
            self._reads = ReadAhead(self.parts.settings.parse_workers)
            if self.parts.settings.cluster:  # heavy reads parsed and chunked on the Ray cluster's nodes
                from indexer.cluster.parsing import ClusterReads

                parts = self.parts
                self._reads.far = ClusterReads(
                    lambda: parts.model.engine,
                    lambda: SplitRecipe(parts.chunk_tokens, parts.settings.chunk_overlap, parts.chunk_context,
                                        parts.prompts.document),
                    shared=parts.settings.cluster_shared_roots)
        return self._reads

    def source_for(self, root: str) -> Source:
        """The source of ``root`` (the configured source plugin; it says which paths are its own)."""
        return self.parts.source_for(root)

    def warm_up(self) -> None:
        """Load the embedding model and embed one text, and load the store's index with one search (a FAISS
        collection of 17,000 points: about 2 s on a 2-core machine), so the first change pays for neither."""
        rec = self.parts.require_record()
        vectors = self.parts.document_embedder.embed_batch(["warm up"], rec.normalization)
        self.parts.store.search(self.name, vectors[0], 1)

    # -- operations ----------------------------------------------------------------------------------------
    def index(self, paths: Sequence[str | Path], progress: Progress | None = None) -> IndexReport:
        """Add ``paths`` as roots (if new) and sync them. Files under other roots are untouched."""
        self.parts.check_settings()
        roots = [_resolve_root(p) for p in paths]
        notes: list[str] = []

        def attach() -> list[str]:
            attached = [self._attach_root(root, notes) for root in roots]
            return [r for r in dict.fromkeys(attached) if r in self.parts.state.roots(self.name)]  # each synced once

        report = self._sync_roots(attach, progress)
        report.notes.extend(notes)
        blind = blind_spots.say_once(self.parts, self.name)  # the model's blind spots, said once
        if blind:
            report.notes.append(blind)
            logger.warning("%s", blind)
        return report

    def sync(self, progress: Progress | None = None) -> IndexReport:
        """Re-sync every root of the collection (a root that vanished keeps its points and is reported)."""
        self.parts.require_record()
        self.parts.check_settings()
        return self._sync_roots(lambda: self.parts.state.roots(self.name), progress)

    def repair_store(self) -> None:
        """Throw away the store's copy of the collection (damaged, unreadable: ``indexer index --repair``); the
        next sync re-creates it and refills it from the cached vectors and the files. A store folder the state
        does not know is removed."""
        parts = self.parts
        with parts.writer_lock():
            if parts.record is None:
                parts.drop_store()
                leftovers.remove(parts.settings, self.name)
                return
            logger.warning("repair: dropping the %s store's copy of collection %r to rebuild it", parts.record.store,
                           self.name)
            parts.store.drop(self.name)
            parts.drop_store()
            parts.mark_repairing()

    def sync_paths(self, paths: Iterable[str | Path], progress: Progress | None = None) -> IndexReport:
        """Bring exactly ``paths`` (files or folders: created, changed, deleted or moved) in line with the disk.

        The watcher calls this per batch of events. Paths outside the collection's roots are ignored; a missing
        folder removes every file under it; an existing folder is rescanned (ignore-file edits, moves in).
        Unchanged chunk texts reuse their cached vectors, so a rename re-embeds nothing."""
        parts = self.parts
        parts.require_record()
        parts.check_settings()
        report = IndexReport()
        started = time.perf_counter()
        with parts.writer_lock():
            pipeline = self._pipeline(parts.ensure_created(), progress, kept=True)
            pipeline.recover()
            # the repair a full sync does: files whose points the store lost (e.g. its files were deleted, and
            # ensure_created re-made it empty) are re-written with this batch, from the vector cache
            lost = self._mark_lost_points(self._kept.fresh())
            if lost:  # the orphans removed below would take the kept large files' slices: they start over
                for path in self._kept.paths():
                    pipeline.drop_kept(path)
                    report.unfinished.append(path)
            for root, group in _group_by_root([*paths, *lost], parts.state.roots(self.name)).items():
                pipeline.sync_paths(self._kept_source(root), root, group, report)
            if lost:
                report.points_deleted += self._remove_orphans()
            parts.repaired()
        parts.agreement_seen = None
        report.seconds = time.perf_counter() - started
        self._after_write(report)
        return report

    def forget(self, path: str | Path) -> IndexReport:
        """Remove a root and every point of its files."""
        parts = self.parts
        root = str(user_path(path))
        if parts.record is None or root not in parts.state.roots(self.name):
            known = parts.state.roots(self.name)
            outer = next((r for r in known if within(root, r)), None)
            if outer is not None:
                rel = Path(root).relative_to(outer).as_posix()
                raise InputError(
                    f"{root} is inside root {outer} and indexed as part of it, not a root of its own; to stop "
                    f"indexing it, add the line `/{rel}/` to {Path(outer) / '.indexerignore'} (the next sync removes "
                    f"its points), or forget the whole root: `indexer forget {outer}`"
                )
            raise InputError(
                f"{root} is not a root of collection {self.name!r} (roots: {', '.join(known) or 'none'})"
            )
        report = IndexReport()
        with parts.writer_lock():
            pipeline = self._pipeline(parts.record, None)
            pipeline.recover()
            files = [p for p in parts.state.files(self.name) if within(p, root)]
            pipeline.remove_files(files, report)
            parts.state.remove_root(self.name, root)
        return report

    def drop(self) -> None:
        """Delete the collection: its points, its state and (for embedded stores) its files."""
        parts = self.parts
        if parts.record is None:
            with parts.writer_lock():
                parts.drop_store()
                if not leftovers.remove(parts.settings, self.name):  # a store folder the state does not know
                    raise NotFoundError.collection(self.name)
            return
        with parts.writer_lock():
            reindex.abort(parts)
            parts.store.drop(self.name)
            path = parts.absolute(parts.record.store_options).get("path")
            parts.drop_store()
            if (
                path
                and Path(path).is_dir()
                and within(str(Path(path).resolve()), str(Path(parts.settings.data_dir).resolve()))
            ):
                shutil.rmtree(path, ignore_errors=True)
            parts.state.drop_collection(self.name)
            blind_spots.forget(parts, self.name)
            parts.repaired()
            parts.forget_made()

    # -- helpers -----------------------------------------------------------------------------------------
    def _sync_roots(self, roots: Callable[[], list[str]], progress: Progress | None) -> IndexReport:
        """Under the writer lock: create (or repair) the collection, sync each root, remove points no file owns,
        refill points the store lost, and drop unused cached vectors."""
        parts = self.parts
        report = IndexReport()
        parts.join_cluster()
        with parts.writer_lock(), ClusterRun(parts, ports.as_progress(progress)):
            pipeline = self._pipeline(parts.ensure_created(), progress)
            pipeline.recover()
            self._ensure_lexical(report)
            self._ensure_fields()
            self._mark_lost_points()
            for root in roots():
                pipeline.sync(parts.source_for(root), root, report)
            report.points_deleted += self._remove_orphans()
            # points written before the payload keys filters read (Qdrant): given them, resumably, no re-embedding
            payloads.backfill(parts.store, self.name, lambda paths: parts.state.files_at(self.name, paths))
            keep_live(parts.store, parts.record)  # a collection reindexed before the store kept that record
            parts.state.gc_vector_cache(pipeline.model_key)
            parts.repaired()
        parts.agreement_seen = None
        cluster = parts.cluster_work()
        if cluster is not None:
            report.notes.append(cluster_note(cluster))
            report.cluster = cluster
        self._after_write(report)
        return report

    def _after_write(self, report: IndexReport) -> None:
        """After a batch that changed points: the store's recall measured in the background when due."""
        if report.points_upserted or report.points_deleted:
            self._recall.after_write(self.parts.store, self.name)

    def _mark_lost_points(self, in_flight: int = 0) -> list[str]:
        """Files whose points the store lost are re-read on this sync (their vectors come from the cache); returns
        their paths. The full id comparison runs only when the counts disagree (``health()`` always compares);
        ``in_flight``: points of part-written large files the store holds beyond the committed ones."""
        parts, name = self.parts, self.name
        expected = parts.state.count_points(name)
        if expected == 0 or parts.store.count(name) in (expected, expected + in_flight):
            return []
        lost = parts.state.point_ids(name) - parts.store.list_ids(name)
        if not lost:
            return []
        paths = parts.state.paths_of_points(name, lost)
        logger.warning("the store lost %d points of %d files; re-writing them", len(lost), len(paths))
        parts.mark_repairing()
        parts.state.invalidate_files(name, paths)
        return paths

    def _remove_orphans(self) -> int:
        """Delete points the store holds but no committed chunk owns (e.g. left behind by a lost state file)."""
        parts, name = self.parts, self.name
        if parts.store.count(name) == parts.state.count_points(name):
            return 0  # lost points were re-written above, so equal counts mean equal sets
        orphans = parts.store.list_ids(name) - parts.state.point_ids(name)
        if orphans:
            logger.warning("deleting %d points of collection %r that no indexed file owns", len(orphans), name)
            parts.store.delete(name, sorted(orphans))
        return len(orphans)

    def _ensure_lexical(self, report: IndexReport) -> None:
        """Give a collection made before lexical search its lexical index, or rebuild one whose terms an older
        analyzer made (from the stored texts, no re-embedding), and say so."""
        lexical = lexical_index(self.parts.store)
        if lexical is None:
            return
        before = lexical.lexical_version(self.name)
        if lexical.ensure_lexical(self.name):
            what = "built" if before is None else f"rebuilt (its terms were analyzer version {before}'s)"
            report.notes.append(f"the lexical index of collection {self.name!r} was {what} with the terms of "
                                f"{ANALYZER.label}, from the stored texts (no re-embedding)")
            logger.info("%s", report.notes[-1])

    def _ensure_fields(self) -> None:
        """Record the filterable fields of a collection indexed before metadata filters, from its stored payloads
        (no re-embedding; indexer.state.fields)."""
        parts, fields = self.parts, self.parts.state.fields
        if fields.complete(self.name):
            return
        store = parts.store
        payloads = store.payloads(self.name) if isinstance(store, PayloadScan) else iter(())
        n = fields.backfill(self.name, payloads)
        logger.info("recorded %d filterable field values of collection %r", n, self.name)

    def _pipeline(self, rec: CollectionRecord, progress: Progress | None, *, kept: bool = False) -> Pipeline:
        """The pipeline for this collection. The model is loaded on the first chunk or embedding, so a run that
        finds nothing changed never pays for it. ``kept`` (``sync_paths``): large files part-written by an
        earlier call go on, and under the watcher a call writes large files' slices for about
        ``LARGE_WRITE_SECONDS`` (indexer.index.large). Any other call (a full sync, forget) forgets them: its
        ``recover`` deletes their slices, and a full sync writes every file whole."""
        parts = self.parts
        if not kept:
            self._kept = large.KeptWrites()
        return Pipeline(
            collection=self.name,
            state=parts.state,
            store=parts.store,
            embedder=parts.document_embedder,  # one model handle, loaded on the first chunk (collection/model.py)
            chunker=_LazyChunker(parts),
            normalization=rec.normalization,
            batch_chunks=parts.settings.embed_batch_chunks,
            progress=progress,
            reads=self._read_ahead(),
            detach_after=DETACH_SECONDS if self._following else None,
            chunk_context=self.parts.chunk_context,
            kept=self._kept if kept else None,
            slice_seconds=large.LARGE_WRITE_SECONDS if kept and self._following else None,
            step_tokens=batching.CLUSTER_STEP_TOKENS if parts.settings.cluster else None,
        )

    def _attach_root(self, root: str, notes: list[str]) -> str:
        """Record ``root``. Roots never nest (a file belongs to one root and is counted once): a path inside an
        existing root is synced as part of that root, one containing roots absorbs them; ``notes`` says which."""
        state = self.parts.state
        roots = state.roots(self.name)
        for existing in roots:
            if within(root, existing):
                if root != existing:
                    notes.append(
                        f"{root} is inside the root {existing}, which already covers it: synced as part of it "
                        f"(not a separate root; `indexer forget {existing}` removes both)"
                    )
                return existing
        absorbed = [existing for existing in roots if within(existing, root)]
        for existing in absorbed:
            state.remove_root(self.name, existing)
        if absorbed:
            notes.append(
                f"{root} contains the root{'s' if len(absorbed) > 1 else ''} {', '.join(absorbed)}: now one root "
                f"{root} (their files stay indexed and are counted once)"
            )
        state.add_root(self.name, root)
        return root


def _resolve_root(path: str | Path) -> str:
    p = Path(path).expanduser()
    shown = printable(str(p))
    if not p.exists():
        raise InputError(f"{shown} does not exist; pass an existing folder")
    if not p.is_dir():
        raise InputError(f"{shown} is a file; pass the folder that contains it (roots are folders)")
    resolved = str(p.resolve())
    if not encodable(resolved):
        raise InputError(
            f"{printable(resolved)} is not valid UTF-8 and cannot be a root (names are stored as UTF-8); rename it, "
            "or add its parent folder (the name is then reported and skipped)"
        )
    return resolved


class _LazyChunker:
    """A TokenChunker on the collection's embedder, built on the first document."""

    def __init__(self, parts: CollectionParts) -> None:
        self._parts = parts
        self._chunker: Chunker | None = None

    def chunk(self, doc: Document) -> Iterator[Chunk]:
        if self._chunker is None:
            parts = self._parts
            self._chunker = chunker_for(parts.document_embedder, parts.chunk_tokens, parts.settings.chunk_overlap)
        return self._chunker.chunk(doc)


def _group_by_root(paths: Iterable[str | Path], roots: Sequence[str]) -> dict[str, list[str]]:
    """Absolute, resolved paths (and a link's own absolute name) grouped by the (innermost) root that holds them;
    others are dropped."""
    out: dict[str, list[str]] = {}
    for raw in paths:
        absolute = os.path.abspath(os.path.expanduser(os.fspath(raw)))
        path = os.path.realpath(absolute)
        # a link's own name too: a file indexed under it and since replaced by a link (or a link retargeted) is
        # re-checked there, so its record goes when the new target is not taken under that name
        for candidate in dict.fromkeys((path, absolute)):
            owners = [r for r in roots if within(candidate, r)]
            if owners:
                out.setdefault(max(owners, key=len), []).append(candidate)
            elif candidate == path:
                logger.debug("ignoring %s: outside every root", path)
    return out
