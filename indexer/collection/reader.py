"""The read face of a collection: search, status, the text of an indexed file, the lexical hint.

A :class:`CollectionReader` drives one :class:`~indexer.collection.parts.CollectionParts`; it never writes the
state or the store (a missing store collection is a StoreError naming the repair, never an empty result). The
server's query side holds one per collection (``Service.reader``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from indexer.collection import blind_spots, job, leftovers, tokenizer_record
from indexer.collection import health as agreement_checks
from indexer.collection.files import Thumbnails, read_indexed_bytes
from indexer.collection.parts import CollectionParts, PartsView
from indexer.core.images import MAX_IMAGE_BYTES, for_sending
from indexer.core.normalization import normalization_name
from indexer.engine.adapters import model_name
from indexer.engine.loader import embeds_images
from indexer.errors import StoreError
from indexer.models import native
from indexer.ports import lexical_index, recall_check
from indexer.search import recall as recall_estimate
from indexer.search.fusion import FusionConfig
from indexer.search.lexical import ANALYZER, LEXICAL_VERSION
from indexer.search.lexical import analyzer as terms_analyzer
from indexer.search.lexical import known as lexical_known
from indexer.search.query import QueryLimits, SearchRequest, SearchResult, Selection, prepare, run_search
from indexer.search.rerank import RerankBudget
from indexer.settings import Settings
from indexer.state.cluster_runs import read_run
from indexer.state.fields import Where, clause_order, compile_where

logger = logging.getLogger(__name__)

# A filter estimated to match at least this share of the chunks, or this many and 2 % of them, checks a search's
# candidates (widening until enough match) instead of listing every matching id (bench/filters.py, docs/search.md).
BROAD_SHARE = 0.05
BROAD_MATCHES = 20_000


# A collection whose chunks are held in memory (indexer.state.columns) counts a filter's matches exactly; up to this
# many go to the store as the exact selection, whatever their share (bench/filters.py --served: cheaper than
# checking 1.5x k / share candidates once the stores keep the set converted).
LISTED_MATCHES = 20_000


def broad(total: int, fraction: float) -> bool:
    return total > 0 and (fraction >= BROAD_SHARE or (total * fraction >= BROAD_MATCHES and fraction >= 0.02))


class CollectionReader(PartsView):
    """Searches and reads one collection. ``owns_parts``: closing the reader closes its parts."""

    committed_only = False  # the store leaves out uncommitted points by their payload marker (a stateless worker)

    def __init__(self, parts: CollectionParts, *, owns_parts: bool = True) -> None:
        self.parts = parts
        self._owns_parts = owns_parts
        self._rerank_budget = RerankBudget(parts.settings.rerank_budget_ms)  # paced by this collection's searches
        self._thumbnails = Thumbnails()
        st = parts.settings  # a collection only searched is measured again once enough new searches were made
        self._recall = recall_estimate.RecallWatch(
            tune=st.recall_tuning, floor=st.recall_floor, sample=st.recall_sample, interval=st.recall_interval,
            latency_budget_ms=st.recall_latency_budget_ms)

    # -- what the parts hold ------------------------------------------------------------------------------







    @property
    def single_process(self) -> bool:
        return self.parts.single_process

    def close(self) -> None:
        self._recall.wait(recall_estimate.WAIT_S)  # a measurement in flight records before the store closes
        if self._owns_parts:
            self.parts.close()

    # -- searching ---------------------------------------------------------------------------------------
    def search(self, request: SearchRequest | str = "", **options: Any) -> SearchResult:
        """Run one search. ``request`` is a :class:`SearchRequest`, or the query text with the request's fields
        as keyword options. Defaults (``top_k``, ``candidates``, mode, rerank) and caps come from the settings;
        anything out of range is an InputError naming the valid range. Follows a model switch made by
        `indexer reindex` in another process (one SELECT per query)."""
        return self.parts.following(lambda: self._search(request, **options))

    def _search(self, request: SearchRequest | str, **options: Any) -> SearchResult:
        parts = self.parts
        rec = parts.require_record()
        if isinstance(request, str):
            request = SearchRequest.from_options(request, **options)
        elif options:
            request = replace(request, **options)
        if isinstance(request.image, (str, os.PathLike)):  # a path: only an indexed file inside a root is read
            cap = max(MAX_IMAGE_BYTES, parts.settings.max_image_file_size)
            data = read_indexed_bytes(parts, os.fspath(request.image), cap)
            # an indexed photo past the query cap is downscaled first, as a client does (the same vector)
            request = replace(request, image=data if len(data) <= MAX_IMAGE_BYTES else for_sending(data))
        req = prepare(request, self.query_limits())
        parts.check_settings()
        parts.check_store_meta(rec)
        if request.mode is None and req.mode != "dense" and not self.lexical_ready():
            # The default needs a lexical index this collection does not have: made by an older version (the next
            # `indexer index` builds it), or in a store that keeps none (an attached collection: never will).
            logger.warning("collection %r: %s; searching dense only", self.name, self.lexical_hint())
            req = replace(req, mode="dense")
        rerank_wanted = req.rerank is not False
        result = run_search(
            req,
            collection=self.name,
            store=parts.store,
            embedder=parts.query_embedder,
            normalization=rec.normalization,
            reranker=parts.reranker if rerank_wanted else None,
            reranker_configured=bool(parts.settings.rerank_model),
            fusion=self.fusion_config(),
            budget=self._rerank_budget,
            select=self.select,
            hidden=self.hidden,
            committed_only=self.committed_only,
        )
        self._recall.after_search(parts.store, self.name)
        warning = self.search_warning()
        return replace(result, warning=warning) if warning else result

    def search_warning(self) -> str | None:
        """Why a search's hits may be incomplete (state and store disagree), or None."""
        return agreement_checks.search_warning(self.parts)

    def hidden(self) -> frozenset[str]:
        """Point ids no search may see: written but not committed (a large file's slices while it is written, so
        a search sees the file's previous version until the new one is complete). One indexed SELECT, on a
        table that is empty between writes."""
        return frozenset(self.parts.state.pending_orphans(self.name))

    def select(self, req: SearchRequest) -> Selection:
        """The exact evaluation of a prepared request's filter clauses and facets in the state database: the
        matching point ids (the store searches among them only), their count and the facet counts."""
        fields = self.parts.state.fields
        kinds = fields.check(self.name, req.where, req.facets)
        where = compile_where(self.name, req.where, req.path_prefix, req.file_types, kinds)
        if not req.where:
            return Selection(None, None, fields.facets(self.name, where, req.facets) if req.facets else {})
        counted = fields.count(self.name, where)
        if counted is not None:  # the collection's chunks held in memory: the filter an exact mask, kept
            return self._select_held(req, where, kinds, *counted)
        total, fraction, shares = fields.estimate_clauses(where)
        if shares:  # the most selective clause first: the matches are listed from it, the others checked on them
            clauses = tuple(req.where[i] for i in clause_order(shares))
            where = compile_where(self.name, clauses, req.path_prefix, req.file_types, kinds, selective_first=True)
        facets = fields.facets(self.name, where, req.facets) if req.facets else {}
        if broad(total, fraction):
            # Many chunks match: listing them costs more than checking a search's candidates (docs/search.md).
            return Selection(None, None, facets, keep=lambda ids: fields.among(where, ids), share=fraction,
                             listing=lambda: frozenset(fields.select(where)))
        ids = frozenset(fields.select(where))
        note = None
        if not ids:
            note = self._emptied_by(req, kinds)
        return Selection(ids, len(ids), facets, note=note)

    def _select_held(self, req: SearchRequest, where: Where, kinds: dict[str, str], total: int,
                     matched: int) -> Selection:
        """The filter counted exactly from the held columns (indexer.state.columns), its matches listed once per
        state of the collection (the same set object: the stores keep the last few converted). Up to
        LISTED_MATCHES of them go to the store, which searches among them only; more, when broad, check a
        search's candidates (as :meth:`select` does in SQL)."""
        fields = self.parts.state.fields
        facets = fields.facets(self.name, where, req.facets) if req.facets else {}
        if not matched:
            return Selection(frozenset(), 0, facets, note=self._emptied_by(req, kinds))
        ids = fields.matching(self.name, where)
        if matched > LISTED_MATCHES and broad(total, matched / total):
            return Selection(None, matched, facets, keep=lambda found: {i for i in found if i in ids},
                             share=matched / total, listing=lambda: ids)
        return Selection(ids, matched, facets)

    def _emptied_by(self, req: SearchRequest, kinds: dict[str, str]) -> str:
        """Which clause left no chunk: the first whose addition to the ones before it matches nothing."""
        fields = self.parts.state.fields
        for i, clause in enumerate(req.where):
            if not fields.any(compile_where(self.name, req.where[: i + 1], req.path_prefix, req.file_types, kinds)):
                alone = fields.any(compile_where(self.name, (clause,), None, (), kinds))
                why = "together with the clauses before it" if alone and i else "on its own"
                return (f"no chunk matches '{clause.text}' {why}; `indexer fields` lists the fields and their "
                        "commonest values")
        return "no chunk matches the path and type filters"

    def fields(self) -> list[dict[str, Any]]:
        """The fields this collection can be filtered on: name, kind (text, number, date, path), the chunks that
        have it and its commonest values with their counts (`indexer fields`, GET /fields, the MCP tool)."""
        self.parts.require_record()
        fields = self.parts.state.fields
        out = fields.summary(self.name)
        if not fields.complete(self.name):
            out.append({"field": "(metadata)", "kind": "pending", "chunks": 0, "examples": [],
                        "note": f"indexed before metadata filters; `indexer index -c {self.name}` records them"})
        return out

    def query_limits(self) -> QueryLimits:
        return QueryLimits.from_settings(self.parts.settings)

    def fusion_config(self) -> FusionConfig:
        return FusionConfig.of(self.parts.settings.fusion, self.parts.settings.fusion_dense_weight)

    # -- the lexical index ----------------------------------------------------------------------------------
    def lexical_hint(self) -> str:
        """Why this collection has no lexical index, and whether anything builds one."""
        rec = self.parts.require_record()
        if lexical_index(self.parts.store) is None:
            return (
                f"its {rec.store} store keeps no lexical index (the default search mode needs one), and indexing "
                "does not add one; ask for mode 'dense', or set search_mode = \"dense\""
            )
        return f"it has no lexical index yet (made by an older version); `indexer index -c {self.name}` builds it"

    def lexical_terms(self) -> str | None:
        """How the collection's lexical terms were made (the analyzer's name and version), or None."""
        lexical = lexical_index(self.parts.store)
        try:
            version = lexical.lexical_version(self.name) if lexical is not None else None
        except StoreError:
            return None
        if version is None:
            return None
        label = terms_analyzer(version).label if lexical_known(version) else f"analyzer version {version}"
        return label if version == LEXICAL_VERSION else f"{label} (`indexer index` rebuilds it with {ANALYZER.label})"

    def lexical_ready(self) -> bool:
        lexical = lexical_index(self.parts.store)
        if lexical is None:
            return False
        try:
            return lexical.has_lexical(self.name)
        except StoreError:  # the store's collection is missing: status reports that through health
            return False

    # -- reading ------------------------------------------------------------------------------------------
    def indexed_file(
        self, path: str, query: str | None = None, lines: tuple[int, int | None] = (1, None)
    ) -> dict[str, Any]:
        """The text of ``path`` as the indexing reader extracted it, if it is an indexed file of this collection
        inside one of its roots (anything else is a NotFoundError): the rule of :mod:`indexer.collection.files`.
        With ``query``: ``marks``, the [start, end) offsets in the text of the words that match it on ``lines``
        (first, last; 1-based), marked as a hit's snippet is (:func:`indexer.search.snippets.passage_marks`)."""
        from indexer.collection.files import read_indexed_file
        from indexer.search.snippets import passage_marks

        out = read_indexed_file(self.parts, path)
        if query:
            out["marks"] = passage_marks(out["text"], query, *lines)
        return out

    def overview(self, watcher: dict[str, Any] | None = None) -> dict[str, Any]:
        """The collection at a glance for a person (:func:`indexer.collection.overview.overview`): counts, roots,
        last commit, models by name, the watcher (``watcher``: a running one's status; else its status file) and
        example queries. State reads only: no store or model call."""
        from indexer.collection.overview import overview
        from indexer.state.watch_files import describe

        parts = self.parts
        if parts.record is None:
            raise leftovers.not_found(parts.settings, self.name)
        if watcher is None:
            watcher = _watcher_status(parts.settings, self.name)
        return overview(parts.state, self.name, parts.record, parts.settings, watcher, describe(watcher))

    def thumbnail(self, path: str, size: int = 256) -> bytes:
        """A JPEG thumbnail (at most ``size`` pixels a side) of an indexed image inside a root (the same rule as
        :meth:`indexed_file`; made once, then cached)."""
        return self._thumbnails.get(self.parts, path, size)

    def health(self) -> dict[str, Any]:
        """Whether the store holds exactly the points the state says (:func:`indexer.collection.health.health`)."""
        return agreement_checks.health(self.parts)

    def agreement(self) -> str | None:
        """None when state and store agree, else the problem (:func:`indexer.collection.health.agreement`)."""
        return agreement_checks.agreement(self.parts)

    def recall(self) -> dict[str, Any]:
        """The approximate index's recall@10 as last measured against exact search (docs/stores.md#recall-that-holds):
        the estimate (None: not measured yet, or a store that does not measure), the floor, and one line."""
        check, floor = recall_check(self.parts.store), self.parts.settings.recall_floor
        estimate = check.recall_estimate(self.name) if check is not None else None
        budget = self.parts.settings.recall_latency_budget_ms
        text = (recall_estimate.describe(estimate, floor, budget) if check is not None
                else f"not measured by the {self.parts.record.store if self.parts.record else '?'} store")
        return {"estimate": estimate.to_dict() if estimate else None, "floor": floor,
                "below_floor": recall_estimate.below(estimate, floor), "text": text}

    def status(self) -> dict[str, Any]:
        parts = self.parts
        if parts.record is None:
            raise leftovers.not_found(parts.settings, self.name)  # names a store folder the state does not know
        rec = parts.record
        counts = parts.state.counts(self.name)
        health = self.health()
        lexical = self.lexical_ready()
        reading, blind = blind_spots.check(parts, self.name)
        return {
            "collection": self.name,
            "files": counts["files"],
            "failed_files": counts["failed"],
            "chunks": counts["chunks"],
            "tokens": counts["tokens"],
            "points": health["store_points"],
            "store": rec.store,
            "store_options": rec.store_options,
            "store_location": parts.store_location(rec),
            "metric": rec.metric,
            "model": rec.model_id,
            "model_name": model_name(rec.model_id),  # the id without fingerprint and tokenizer tag
            "model_path": rec.model_path,
            "tokenizer": tokenizer_record.describe(parts.store.collection_meta(self.name), self.name),
            "weights": native.weights_status(rec.model_path),
            "dimensions": rec.dimensions,
            "normalization": normalization_name(rec.normalization),
            "roots": parts.state.roots(self.name),
            "reranker": parts.settings.rerank_model,
            "search_mode": parts.settings.search_mode,
            "lexical_index": lexical,
            "lexical_note": None if lexical else self.lexical_hint(),
            "lexical_terms": self.lexical_terms(),
            # how much of its text the model barely reads (indexer.models.coverage), and what to do then
            "model_reads": {**reading.to_dict(), "note": blind},
            "prompts": {"query": parts.prompts.query, "document": parts.prompts.document},
            "chunk_tokens": parts.recorded_chunk_tokens() or "the model's limit",
            "chunk_context": parts.chunk_context,
            # pictures: whether the model embeds images (its projector beside it: a file check, never behind a
            # model load on another thread) and the image points it made
            "pictures": embeds_images(rec.model_path),
            "image_points": parts.state.image_points(self.name),
            "watcher": _watcher_status(parts.settings, self.name),
            "cluster": read_run(parts.settings.data_dir, self.name),  # the last or ongoing run on a Ray cluster
            "health": health,
            "recall": self.recall(),
            "failures": [{"path": p, "reason": r} for p, r in parts.state.failures(self.name)],
            "reindex": job.progress(parts.settings.data_dir, self.name, parts.state),
            "last_indexed": _iso(parts.state.last_commit(self.name)),
            # large files being written (by any process): chunks written so far, hidden from searches until the
            # file commits; the watcher's status adds the total and the files still being read
            "writing": [{"path": p, "chunks_written": n}
                        for p, n in sorted(parts.state.pending_by_path(self.name).items())],
        }


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="seconds")


def _watcher_status(settings: Settings, name: str) -> dict[str, Any] | None:
    from indexer.state.watch_files import read_status

    return read_status(settings.data_dir, name)
