"""The indexing pipeline: plan (stat/hash diff) -> chunk -> embed only what is new -> upsert -> delete stale -> commit.

Crash safety rests on the write order. For every batch of files:

1. vectors come from the cache (by chunk text hash) or are embedded and cached;
2. the new point ids are recorded as *pending* in the state store (committed);
3. the points are upserted (durable when the call returns);
4. point ids the files no longer have are deleted;
5. the files' new state (hash, chunk ids) is committed, clearing their pending ids.

Point ids are deterministic (path, chunk index, chunk text, the rest of the payload), so replaying a batch is
idempotent, and a point a committed file already owns under the same id is not written again. A run killed
anywhere leaves either the old state (and replays) or pending ids no committed chunk owns, which the next run
deletes first (``recover``). Either way the next run ends with exactly the index a clean run builds.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from functools import partial

import numpy as np

from indexer import ports
from indexer.core.normalization import Normalization, cache_tag
from indexer.core.paths import within
from indexer.errors import IndexerError, SourceError
from indexer.index.batching import BATCH_SECONDS, Batch, Deferred, embed_steps
from indexer.index.changes import cyclic_gc_paused, refs_below, stat_unchanged
from indexer.index.large import KeptWrites, LargeWrite, SliceBudget
from indexer.index.payloads import PayloadKeeper, fingerprint, point_payload
from indexer.index.points import Prepared, chunk_record, committed, file_record, point_id
from indexer.index.reads import ReadAhead
from indexer.index.splitting import Splitter
from indexer.names import encodable, printable
from indexer.ports import Chunker, Embedder, Progress, Source, SourcePlugin, VectorStore
from indexer.state.database import FileRecord, FileStat, FileUpdate, StateStore
from indexer.types import BAD_NAME, Chunk, Document, IndexReport, Point, ScanProblem, SourceRef

logger = logging.getLogger(__name__)

# Scan problems that leave an already indexed file failed with its points kept (docs/indexing.md); any other
# problem (binary now, symlink escaping the root, ...) means the file is no longer part of the index.
KEEP_ON_PROBLEM = frozenset({"too_large", "permission", "error"})


class _NoProgress(Progress):
    """Nobody listens (every member of :class:`Progress` is a no-op)."""


class Pipeline:
    """Keeps one collection of a store in step with the files under its roots."""

    def __init__(
        self,
        *,
        collection: str,
        state: StateStore,
        store: VectorStore,
        embedder: Embedder,
        chunker: Chunker,
        normalization: Normalization,
        batch_chunks: int = 256,
        progress: Progress | None = None,
        batch_seconds: float = BATCH_SECONDS,
        reads: ReadAhead | None = None,
        detach_after: float | None = None,
        chunk_context: str = "none",
        kept: KeptWrites | None = None,
        slice_seconds: float | None = None,
        step_tokens: int | None = None,
    ) -> None:
        self.collection = collection
        self.state = state
        self.store = store
        self.embedder = embedder
        self.chunker = chunker
        self.normalization = normalization
        self.batch_chunks = batch_chunks
        self.batch_seconds = batch_seconds
        self.step_tokens = step_tokens  # tokens per embedding step (None: EMBED_STEP_TOKENS; a cluster's are larger)
        progress = ports.as_progress(progress)  # a listener of the Python API may define only some members
        self.progress: Progress = progress or _NoProgress()
        # Unchanged files are reported one by one only to a listener: at 100k files the calls alone cost ~0.1 s.
        self._listening = progress is not None
        self.model_key = f"{embedder.model_id}|norm={cache_tag(normalization)}"
        # Files are read in threads (indexer.index.reads); with ``detach_after`` (the watcher) a read running
        # longer than that, once every other file of the call is written, is left running in the background.
        self.reads = reads
        self.detach_after = detach_after
        self._split = Splitter(chunker, embedder, self.progress, self._listening, chunk_context)
        # large files part-written by an earlier call (the watcher's writer keeps them: indexer.index.large); with
        # ``slice_seconds`` a call writes large files' slices for about that long and keeps the rest for the next
        self.kept = kept
        self.slice_seconds = slice_seconds if kept is not None else None
        self.keeper = PayloadKeeper(store, collection)  # the filter language's payload keys (Qdrant)

    # -- recovery ----------------------------------------------------------------------------------------
    def recover(self) -> int:
        """Delete points an interrupted run wrote but never committed (not those of the large files this writer
        is still writing: :attr:`kept`). Returns how many were deleted."""
        keep = self.kept.paths() if self.kept is not None else []
        orphans = self.state.pending_orphans(self.collection, keep)
        if orphans:
            logger.info("recovering: deleting %d uncommitted points of an interrupted run", len(orphans))
            self.store.delete(self.collection, orphans)
        self.state.clear_pending(self.collection, keep)
        if not keep:  # a kept large file's slices keep their marker (hidden from workers) until it is committed
            self.keeper.recover()
        return len(orphans)

    def drop_kept(self, path: str) -> bool:
        """Forget the kept progress of ``path`` (it changed, was deleted, or a full sync re-reads everything): the
        points it wrote that no committed chunk owns are deleted now. False when nothing was kept."""
        write = self.kept.pop(path) if self.kept is not None else None
        if write is None:
            return False
        owned = set(self.state.chunk_ids(self.collection, [path]).get(path, []))
        written = [pid for pid in write.fresh if pid not in owned]
        if written:
            self.store.delete(self.collection, written)
        return True

    # -- sync ----------------------------------------------------------------------------------------------
    def sync(self, source: Source | SourcePlugin, root: str, report: IndexReport | None = None) -> IndexReport:
        """Bring the files under ``root`` (as ``source`` sees them) into the index."""
        source = ports.as_source(source)  # a plain-protocol source under the port's defaults (idempotent)
        report = report or IndexReport()
        started = time.perf_counter()
        self.recover()
        with cyclic_gc_paused():
            refs = {ref.path: ref for ref in source.scan()}
            stats = self.state.file_stats(self.collection, root)
            report.files_seen += len(refs)
            self.progress.files_total(len(refs))
            todo = self._changed(refs, stats, report)
        report.timed("scan", time.perf_counter() - started)
        # Whole records only for the files that need them: changed ones (read next) and those the scan had a
        # problem with (kept or skipped below). A no-change re-run builds none.
        wanted = [ref.path for ref in todo] + [problem.path for problem in source.problems]
        known = self.state.files_at(self.collection, [path for path in wanted if path in stats])
        self._process(source, todo, known, report)
        kept = self._keep_unreadable(source.problems, known, report)
        if not source.available():
            # An unmounted or vanished root scans as empty: never read that as "every file was deleted".
            logger.warning("root %s is unavailable; its indexed files are kept", root)
        else:
            self.remove_files([p for p in stats if p not in refs and p not in kept], report)
        report.seconds += time.perf_counter() - started
        return report

    def _changed(self, refs: dict[str, SourceRef], stats: dict[str, FileStat], report: IndexReport) -> list[SourceRef]:
        """The scanned files that must be read: new, failed, changed, or changed within the racy window."""
        todo: list[SourceRef] = []
        unchanged = 0
        done = self.progress.file_done if self._listening else None
        for path, ref in refs.items():
            row = stats.get(path)
            if row is not None and stat_unchanged(row, ref):
                unchanged += 1
                if done is not None:
                    done(path)
            else:
                todo.append(ref)
        report.files_unchanged += unchanged
        return todo

    def sync_paths(
        self, source: Source | SourcePlugin, root: str, paths: Sequence[str], report: IndexReport
    ) -> IndexReport:
        """Bring exactly ``paths`` (absolute, resolved, under ``root``) in line with the disk: files are
        (re)indexed or removed, folders rescanned, and a missing path removes every file below it."""
        if not os.path.isdir(root):
            # An unmounted or vanished root is not "every file deleted" (same rule as a full sync).
            logger.warning("root %s is unavailable; its indexed files are kept", root)
            return report
        source = ports.as_source(source)
        known: dict[str, FileRecord] = {}
        refs: dict[str, SourceRef] = {}
        seen_problems = len(source.problems)
        for path in dict.fromkeys(paths):
            if encodable(path):  # nothing is stored under a name that is not UTF-8 (the source reports it)
                known.update(self.state.files_under(self.collection, path))
            if os.path.isdir(path):
                refs.update((r.path, r) for r in refs_below(source, path))
            else:
                ref = source.ref_for(path)
                if ref is not None:
                    refs[ref.path] = ref
        report.files_seen += len(refs)
        resumed = self._resumed(paths, refs)
        going_on = {w.path for w in resumed}
        todo = []
        for path, ref in refs.items():
            rec = known.get(path)
            if path in going_on:
                continue
            if rec is not None and stat_unchanged((rec.size, rec.mtime_ns, rec.status, rec.checked_ns), ref):
                report.files_unchanged += 1
            else:
                todo.append(ref)
        self._process(source, todo, known, report, resumed)
        kept = self._keep_unreadable(list(source.problems)[seen_problems:], known, report)
        self.remove_files([p for p in known if p not in refs and p not in kept], report)
        return report

    def _resumed(self, paths: Sequence[str], refs: dict[str, SourceRef]) -> list[LargeWrite]:
        """The kept large writes this call goes on with: those of ``paths`` whose file is the one read (same size
        and modification time). A kept file that changed or is gone is dropped (read again if it is there)."""
        if self.kept is None or not len(self.kept):
            return []
        resumed = []
        for path in self.kept.paths():
            write = self.kept.get(path)
            ref = refs.get(path)
            if write is not None and ref is not None and write.key == (ref.size, ref.mtime_ns):
                resumed.append(write)
            elif ref is not None or any(within(path, p) for p in paths):
                self.drop_kept(path)
        return resumed

    def _keep_unreadable(
        self, problems: Sequence[ScanProblem], known: dict[str, FileRecord], report: IndexReport
    ) -> set[str]:
        """Indexed files a scan could not take (too large, unreadable) count as failed and keep their points."""
        kept: set[str] = set()
        for problem in problems:
            path, reason, code = problem.path, problem.reason, problem.code
            if code == BAD_NAME:  # never stored (it cannot be): failed, so index exits 3 and the watcher shows it
                logger.warning("cannot index %s: %s", printable(path), reason)
                report.failed.append((path, reason))
                continue
            rec = known.get(path)
            if rec is not None and code in KEEP_ON_PROBLEM:
                kept.add(path)
                ref = SourceRef(rec.root, path, rec.size, rec.mtime_ns)
                self._record_failure(ref, rec, reason, report)
            elif code not in KEEP_ON_PROBLEM or rec is None:
                report.skipped.append((path, reason))
        return kept

    def remove_files(self, paths: Sequence[str], report: IndexReport | None = None) -> None:
        if not paths:
            return
        owned = self.state.chunk_ids(self.collection, paths)
        ids = [pid for ids in owned.values() for pid in ids]
        if ids:
            # recorded as in flight, so the store holding fewer points than the state until the commit is not
            # read as lost points (Collection.agreement); an interrupted run leaves them owned: recover keeps them
            self.state.add_pending(self.collection, [(pid, path) for path, pids in owned.items() for pid in pids])
            self.store.delete(self.collection, ids)
        self.state.commit_files(self.collection, [], removed=paths)
        if report is not None:
            report.files_removed += len(paths)
            report.points_deleted += len(ids)

    def _process(
        self,
        source: Source,
        todo: Iterable[SourceRef],
        known: dict[str, FileRecord],
        report: IndexReport,
        resumed: Sequence[LargeWrite] = (),
    ) -> None:
        """Read, chunk and write ``todo`` in batches bounded by count and time; a file larger than a batch is
        written on its own in slices, after the small files (:mod:`indexer.index.batching`).

        Files are read smallest first, up to the source's ``parallel_reads`` at a time in threads
        (:mod:`indexer.index.reads`), and taken as each read ends: a slow one (a scan being OCR'd) holds one
        reader while the others go on, and a batch is written when it is due even while reads are running.

        Large files go last: ``resumed`` (part-written by an earlier call) first, then those read now, within the
        call's slice budget (:mod:`indexer.index.large`)."""
        batch: Batch[Prepared] = Batch(self.batch_chunks, self.batch_seconds)
        budget = SliceBudget(self.slice_seconds)
        since = time.monotonic()
        large: Deferred[Prepared] = Deferred()
        reads = self.reads or ReadAhead(1)
        queue = deque(sorted(todo, key=lambda r: r.size))  # small files first
        width = reads.plan(source, queue)  # with a far lane (a Ray cluster) as many more as it takes
        running: dict[Future[Document], SourceRef] = {}
        try:
            while queue or running:
                while queue and len(running) < width:
                    ref = queue.popleft()
                    running[self._submit(reads, source, ref, known.get(ref.path))] = ref
                self._detach_slow(reads, running, report)  # a read of the file still running from an earlier call
                waited = time.perf_counter()
                done, _ = wait(list(running), timeout=self._wait_seconds(batch), return_when=FIRST_COMPLETED)
                report.timed("read", time.perf_counter() - waited)  # the time spent waiting for reads
                for future in [f for f in running if f in done]:  # in the order they were started
                    asked = running.pop(future)
                    ref = reads.read_ref(asked.path) or asked  # the version read (older if it changed since)
                    if (ref.size, ref.mtime_ns) != (asked.size, asked.mtime_ns):
                        report.stale.append(ref.path)
                    report.charge(ref.path, "read", reads.ran(ref.path, since))
                    if reads.ran(ref.path, 0.0) > reads.ran(ref.path, since):  # it ran in the background before
                        report.read_before[ref.path] = reads.ran(ref.path, 0.0) - reads.ran(ref.path, since)
                    chunks = reads.prepared(ref.path)
                    reads.taken(ref.path)
                    prepared = self._prepare(future, ref, known.get(ref.path), report, chunks)
                    if prepared is None:
                        continue
                    if prepared.size <= self.batch_chunks:
                        batch.add(prepared)
                    elif not large.offer(prepared):
                        self._write_large(self._start_large(prepared), report, budget)
                stalled = batch.items and not done and (not queue or self.detach_after is not None)
                if batch.due() or stalled:
                    # due; or no read ended within the wait: only slow reads left, or (the watcher, where a change
                    # waits for this batch) a pause in the reads
                    self._write_batch(batch.take(), report)
                if running and not done:
                    self._detach_slow(reads, running, report)
            if batch.items:
                self._write_batch(batch.take(), report)
            for write in [*resumed, *(self._start_large(p) for p in large.items)]:
                self._write_large(write, report, budget)
        finally:
            if self.reads is None:
                reads.close()

    def _wait_seconds(self, batch: Batch[Prepared]) -> float | None:
        """How long to wait for a read: until the open batch is due, or the next check for slow reads."""
        waits = []
        if batch.items:
            waits.append(batch.seconds_left())
        if self.detach_after is not None:
            waits.append(min(self.detach_after, 0.1))
        return max(0.0, min(waits)) if waits else None

    def _detach_slow(self, reads: ReadAhead, running: dict[Future[Document], SourceRef], report: IndexReport) -> None:
        """With ``detach_after`` set (the watcher): leave each slow read (running that long, or queued behind
        other slow ones: :meth:`ReadAhead.slow`) running in the background, where the next sync of its path
        takes the document, and go on with the others: the call never waits for one."""
        if self.detach_after is None:
            return
        for future, ref in list(running.items()):
            if not reads.slow(ref.path, self.detach_after):
                continue
            logger.debug("%s is still being read after %.1f s; syncing the other changes meanwhile",
                         printable(ref.path), reads.age(ref.path))
            reads.detach(ref.path)
            report.reading.append(ref.path)
            del running[future]

    def _submit(self, reads: ReadAhead, source: Source, ref: SourceRef, rec: FileRecord | None) -> Future[Document]:
        """Start the read of ``ref``. Under the watcher the file is chunked in the reader thread too (unless its
        content is the one indexed), so a file slow to chunk is left in the background like a slow read."""
        if self.detach_after is None:
            return reads.submit(source, ref)
        indexed = rec.content_hash if rec is not None and rec.status == "indexed" else None
        return reads.submit(source, ref, partial(self._chunked_unless, indexed))

    def _chunked_unless(self, indexed: str | None, doc: Document) -> list[Chunk] | None:
        """(A reader thread.) The document's chunks, or None when its content is the ``indexed`` one."""
        return None if doc.content_hash == indexed else self._split.chunks(doc, quiet=True)

    def _prepare(
        self,
        read: Future[Document],
        ref: SourceRef,
        rec: FileRecord | None,
        report: IndexReport,
        chunked: list[Chunk] | None = None,
    ) -> Prepared | None:
        """Chunk one file that was read (``chunked``: done in its reader thread); None when there is nothing to
        write (failed, or only its stat changed)."""
        try:
            doc = read.result()
            if rec is not None and rec.status == "indexed" and doc.content_hash == rec.content_hash:
                self._touch(ref, doc, rec)
                report.files_touched += 1
                return None
            started = time.perf_counter()
            if chunked is not None and self._listening:  # chunked elsewhere: the progress counts them now
                self.progress.chunked(len(chunked))
            chunks = chunked if chunked is not None else self._split.chunks(doc)
            seconds = time.perf_counter() - started
            report.timed("chunk", seconds)
            report.charge(ref.path, "chunk", seconds)
        except SourceError as exc:
            if exc.code in ("binary", "missing_library"):  # not text, or no parser installed: skipped, not failed
                report.skipped.append((ref.path, exc.reason))
                if rec is not None:
                    self.remove_files([ref.path], report)
                self.progress.file_done(ref.path)
                return None
            self._record_failure(ref, rec, exc.reason, report)
            return None
        except IndexerError as exc:
            self._record_failure(ref, rec, str(exc), report)
            return None
        for note in doc.notes:  # indexed, with parts left out: said, never silent
            logger.warning("%s partly read: %s", printable(ref.path), note)
            report.partial.append((ref.path, note))
        return Prepared(ref, doc, chunks, rec)

    def _touch(self, ref: SourceRef, doc: Document, rec: FileRecord) -> None:
        """Content unchanged: refresh the stat data so the next run skips the file without reading it."""
        chunks = tuple(self.state.chunks(self.collection, ref.path))
        record = FileRecord(ref.path, ref.root, ref.size, ref.mtime_ns, doc.content_hash, "indexed", None, doc.kind)
        self.keeper.restat([(ref, [c.point_id for c in chunks])])  # modified, size: no point re-written
        self.state.commit_files(self.collection, [FileUpdate(record, chunks)])
        self.progress.file_done(ref.path)

    def _record_failure(self, ref: SourceRef, rec: FileRecord | None, reason: str, report: IndexReport) -> None:
        logger.warning("cannot index %s: %s", printable(ref.path), reason)
        report.failed.append((ref.path, reason))
        # Keep the last good content hash (and its points): a failed read never loses what was indexed.
        failed = FileRecord(
            ref.path,
            ref.root,
            ref.size,
            ref.mtime_ns,
            rec.content_hash if rec else "",
            "failed",
            reason,
            rec.kind if rec else None,
        )
        self.state.commit_files(self.collection, [FileUpdate(failed, ())])
        self.progress.file_done(ref.path)

    # -- the write path --------------------------------------------------------------------------------
    def _write_batch(self, batch: list[Prepared], report: IndexReport) -> None:
        all_chunks = [c for p in batch for c in p.chunks]
        vectors = self._vectors(all_chunks, report)
        points: list[Point] = []
        updates: list[FileUpdate] = []
        for prepared in batch:
            records = []
            for chunk in prepared.chunks:
                payload = point_payload(prepared, chunk)
                pid = point_id(prepared.ref.path, chunk.index, chunk.content_hash, fingerprint(payload))
                points.append(Point(pid, vectors[chunk.content_hash], self.keeper.add(payload, prepared, chunk)))
                records.append(chunk_record(pid, chunk))
            updates.append(FileUpdate(file_record(prepared), tuple(records)))

        new_ids = {p.id for p in points}
        old_ids = self.state.chunk_ids(self.collection, [p.ref.path for p in batch])
        stale = [pid for ids in old_ids.values() for pid in ids if pid not in new_ids]
        # A point whose id a committed, intact file already owns is in the store as is (the id covers its whole
        # payload): an appended line re-writes one point, not the file's thousands.
        intact = {p.ref.path for p in batch if committed(p.previous)}
        held = {pid for path, ids in old_ids.items() if path in intact for pid in ids}
        points = [p for p in points if p.id not in held]

        # every id in flight is recorded: written (new) and deleted (stale), so until the commit the store may
        # differ from the state by at most the pending ids (Collection.agreement); an interrupted run leaves the
        # stale ones owned, so recover keeps them (a full sync re-writes them if the store lost them)
        in_flight = [(p.id, str(p.payload["path"])) for p in points]
        in_flight += [(pid, path) for path, ids in old_ids.items() for pid in ids if pid not in new_ids]
        started = time.perf_counter()
        self.state.add_pending(self.collection, in_flight)
        if points:
            self.store.upsert(self.collection, points)
        if stale:
            self.store.delete(self.collection, stale)
        self.keeper.restat([(p.ref, [r.point_id for r in u.chunks if r.point_id in held])
                            for p, u in zip(batch, updates, strict=True)])
        wrote = time.perf_counter()
        self.state.commit_files(self.collection, updates)
        self.keeper.committed([p.id for p in points])
        committed_at = time.perf_counter()
        report.timed("write", wrote - started)
        report.timed("commit", committed_at - wrote)
        for prepared in batch:  # the batch's write and commit, split among its files
            report.charge(prepared.ref.path, "write", (wrote - started) / len(batch))
            report.charge(prepared.ref.path, "commit", (committed_at - wrote) / len(batch))

        report.files_indexed += len(batch)
        report.points_upserted += len(points)
        report.points_deleted += len(stale)
        for prepared in batch:
            self.progress.file_done(prepared.ref.path)

    def _start_large(self, prepared: Prepared) -> LargeWrite:
        ref = prepared.ref
        old_ids = self.state.chunk_ids(self.collection, [ref.path]).get(ref.path, [])
        return LargeWrite(prepared, old_ids, set(old_ids) if committed(prepared.previous) else set())

    def _write_large(self, write: LargeWrite, report: IndexReport, budget: SliceBudget) -> None:
        """A file with more chunks than a batch: its slices written one by one (vectors cached, ids pending, points
        upserted), then its stale points deleted and the file committed with its last slice. A kill loses at most
        the slice in flight: the re-run deletes the uncommitted points (``recover``) and writes them again from
        the vector cache, under the same ids, so nothing is duplicated. Once ``budget`` is spent (the watcher's
        calls) the rest waits in :attr:`kept` for the next call, and the path is reported unfinished."""
        prepared, path = write.prepared, write.path
        while not write.done:
            if budget.spent() and self.kept is not None:
                self.kept.keep(write)
                report.unfinished.append(path)
                return
            self._write_slice(write, report)
        new_ids = {r.point_id for r in write.records}
        stale = [pid for pid in write.old_ids if pid not in new_ids]
        started = time.perf_counter()
        self.state.add_pending(self.collection, [(pid, path) for pid in stale])
        if stale:
            self.store.delete(self.collection, stale)
        self.keeper.restat([(prepared.ref, [pid for pid in new_ids if pid in write.held])])
        wrote = time.perf_counter()
        self.state.commit_files(self.collection, [FileUpdate(file_record(prepared), tuple(write.records))])
        self.keeper.committed(write.fresh)
        done = time.perf_counter()
        report.timed("write", wrote - started)
        report.timed("commit", done - wrote)
        report.charge(path, "write", wrote - started)
        report.charge(path, "commit", done - wrote)
        if self.kept is not None:
            self.kept.pop(path)
        report.files_indexed += 1
        report.points_deleted += len(stale)
        self.progress.file_done(path)

    def _write_slice(self, write: LargeWrite, report: IndexReport) -> None:
        """The next slice of a large file: embedded (or from the cache), its ids pending, its points upserted."""
        prepared, path = write.prepared, write.path
        part = prepared.chunks[write.next : write.next + self.batch_chunks]
        vectors = self._vectors(part, report)
        points = []
        for chunk in part:
            payload = point_payload(prepared, chunk)
            pid = point_id(path, chunk.index, chunk.content_hash, fingerprint(payload))
            write.records.append(chunk_record(pid, chunk))
            if pid not in write.held:
                points.append(Point(pid, vectors[chunk.content_hash], self.keeper.add(payload, prepared, chunk)))
        started = time.perf_counter()
        self.state.add_pending(self.collection, [(p.id, path) for p in points])
        if points:
            self.store.upsert(self.collection, points)
        seconds = time.perf_counter() - started
        report.timed("write", seconds)
        report.charge(path, "write", seconds)
        write.fresh.extend(p.id for p in points)
        write.next += len(part)
        report.points_upserted += len(points)
        logger.info("%s: %d of %d chunks written", printable(path), write.next, prepared.size)
        self.progress.file_part(path, write.next, prepared.size)  # a big file's progress

    def _vectors(self, chunks: Sequence[Chunk], report: IndexReport) -> dict[str, np.ndarray]:
        """Vectors by chunk text hash: from the cache, else embedded (each distinct text once) and cached."""
        hashes = [c.content_hash for c in chunks]
        vectors = self.state.cached_vectors(self.model_key, hashes)
        missing: dict[str, Chunk] = {}
        for chunk in chunks:
            if chunk.content_hash not in vectors:
                missing.setdefault(chunk.content_hash, chunk)
        report.chunks_reused += len(chunks) - len(missing)
        for step in embed_steps(list(missing.values()), self.step_tokens):
            texts = [c for c in step if c.media is None]
            pictures = [c for c in step if c.media is not None]
            started = time.perf_counter()
            inputs = [c.embed_text for c in texts]  # the text, with its context in front (indexer.index.context)
            embedded = list(self.embedder.embed_batch(inputs, self.normalization)) if texts else []
            if pictures:  # only chunks the Splitter made for pictures: the embedder embeds images
                images = self.embedder.embed_images([c.media.data for c in pictures if c.media is not None],
                                                    self.normalization)
                embedded += list(images)
            step = texts + pictures
            seconds = time.perf_counter() - started
            report.embed_seconds += seconds
            report.timed("embed", seconds)
            for path, n in Counter(c.path for c in step).items():  # each step's time split among its chunks' files
                report.charge(path, "embed", seconds * n / len(step))
            fresh = [(c.content_hash, np.asarray(v, dtype=np.float32)) for c, v in zip(step, embedded, strict=True)]
            self.state.put_vectors(self.model_key, fresh)
            vectors.update(fresh)
            tokens = sum(c.n_tokens for c in step)
            report.chunks_embedded += len(step)
            report.tokens_embedded += tokens
            self.progress.embedded(len(step), tokens)
        return vectors
