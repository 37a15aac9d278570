"""Attach to an existing Qdrant collection: inspect it, search it (with reranking), index files into it.

::

    from plugins.qdrant_attach import attach

    with attach("docs", url="http://localhost:6333") as col:       # or path="/data/qdrant" (embedded)
        print(col.report.to_dict())                                 # vectors, indexes, layout, ...
        result = col.search("rotate keys", k=5, filter={"must": [{"key": "metadata.team", "match": {"value": "ops"}}]})
        col.index(["~/notes"])                                      # our files, as points in their layout
        col.forget("~/notes")                                       # removes only our points

Searching reads and never writes. Indexing records the attachment in our state store as a collection named
``qdrant.<collection>`` (``as_name`` overrides) whose store is ``qdrant_attach``, and then goes through the
ordinary facade (:class:`indexer.collection.facade.Collection`), so ``indexer search -c qdrant.docs``, ``status`` and
``forget`` work on it too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from indexer.plugin_api import (
    CollectionMismatchError,
    ConfigError,
    Embedder,
    IndexReport,
    InputError,
    Progress,
    Reranker,
    SearchRequest,
    Settings,
    StoreError,
    load_settings,
    normalization_name,
    user_path,
)
from indexer.plugin_api.collections import (
    CollectionRecord,
    QueryLimits,
    RerankBudget,
    add_record,
    fit_query,
    forget_path,
    get_record,
    index_paths,
    load_embedder,
    load_reranker,
    prepare,
    remove_record,
    rerank_stage,
    resolve_model,
)
from plugins.qdrant_attach.attached_store import AttachedStore, remember_api_key
from plugins.qdrant_attach.compat import ModelProbe, VectorChoice, choose_vector, probe_model
from plugins.qdrant_attach.connect import call, close_client, open_client
from plugins.qdrant_attach.inspection import DEFAULT_SAMPLE, CollectionReport, inspect_collection
from plugins.qdrant_attach.layout import Layout, with_overrides

logger = logging.getLogger(__name__)

STORE_NAME = "qdrant_attach"


@dataclass(frozen=True)
class AttachedHit:
    """A hit in the collection's own terms: its point id, text, metadata and payload, plus our scores.

    ``score`` is Qdrant's score for the chosen vector (a similarity for Cosine/Dot; a distance, lower is closer,
    for Euclid/Manhattan); ``rerank_score`` is the reranker's (higher is more relevant)."""

    id: str | int
    score: float
    rerank_score: float | None
    text: str
    metadata: Mapping[str, Any]
    source: str | None
    ours: bool
    payload: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": self.score,
            "rerank_score": self.rerank_score,
            "text": self.text,
            "metadata": dict(self.metadata),
            "source": self.source,
            "ours": self.ours,
            "payload": dict(self.payload),
        }


@dataclass(frozen=True)
class AttachedResult:
    hits: tuple[AttachedHit, ...]
    vector: str
    reranked: bool
    note: str
    timings_ms: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hits": [h.to_dict() for h in self.hits],
            "vector": self.vector,
            "reranked": self.reranked,
            "note": self.note,
            "timings_ms": dict(self.timings_ms),
        }


def attach(
    collection: str,
    *,
    url: str | None = None,
    path: str | Path | None = None,
    api_key: str | None = None,
    vector: str | None = None,
    add_vector: str | None = None,
    layout: str | None = None,
    text_field: str | None = None,
    metadata_field: str | None = None,
    source_field: str | None = None,
    as_name: str | None = None,
    shard_key: str | None = None,
    sample: int = DEFAULT_SAMPLE,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    client: QdrantClient | None = None,
) -> AttachedCollection:
    """Attach to ``collection`` on a server (``url``, ``api_key``) or in an embedded folder (``path``).

    Only reads happen here. ``vector`` picks the dense vector (default: the one our model fits; "" is the unnamed
    vector); ``add_vector`` names a vector to create for our model on first index, when the collection uses named
    vectors and has none that fits (Qdrant >= 1.18). ``layout``/``*_field`` override the detected payload layout.
    Without ``url`` and ``path``, the ``qdrant_url`` setting is used. ``shard_key``: the key rule of a
    custom-sharded collection's writes (``NAME`` or ``field:PATH``; plugins/qdrant_attach/sharding.py).
    ``embedder``, ``reranker`` and ``client`` (an open client on that location) are borrowed, not closed."""
    settings = settings or load_settings()
    if url is None and path is None:
        url = settings.qdrant_url
        if url is None:
            raise ConfigError("pass url= (a Qdrant server) or path= (an embedded Qdrant folder), or set qdrant_url")
    api_key = api_key if api_key is not None else settings.qdrant_api_key
    where = url if url is not None else str(user_path(str(path)))
    borrowed = client is not None
    if client is None:
        client = open_client(url, where if path is not None else None, api_key)
    if url is not None and api_key:
        remember_api_key(url, api_key)
    try:
        report, _ = inspect_collection(client, collection, where, sample)
        recorded = _recorded(as_name or default_name(report.name), report.name, url or where, settings)
        base = report.layout
        if recorded is not None:  # what the attachment was made with, unless this call says otherwise
            vector = recorded.store_options.get("vector", "") if vector is None and add_vector is None else vector
            base = Layout.from_dict(recorded.store_options["layout"]).with_written_source() if layout is None else base
            shard_key = recorded.store_options.get("shard_key") if shard_key is None else shard_key
        chosen = with_overrides(
            base, kind=layout, text_field=text_field, metadata_field=metadata_field, source_field=source_field
        )
    except BaseException:
        if not borrowed:
            close_client(client)
        raise
    return AttachedCollection(
        settings=settings,
        client=client,
        url=url,
        path=where if path is not None else None,
        api_key=api_key,
        report=report,
        layout=chosen,
        vector=vector,
        add_vector=add_vector,
        shard_key=shard_key,
        name=as_name or default_name(report.name),
        embedder=embedder,
        reranker=reranker,
        borrowed_client=borrowed,
    )


def _recorded(name: str, collection: str, where: str, settings: Settings) -> CollectionRecord | None:
    """The attachment ``name`` when it is one of ``collection`` at ``where`` (else None)."""
    rec = get_record(name, settings)
    if rec is None or rec.store != STORE_NAME:
        return None
    opts = rec.store_options
    if opts.get("collection") != collection or (opts.get("url") or opts.get("qdrant_path")) != where:
        return None
    return rec


def default_name(collection: str) -> str:
    """Our name for an attachment: ``qdrant.<collection>`` with characters our names refuse replaced by '_'."""
    return "qdrant." + "".join(c if c.isalnum() or c in "-_." else "_" for c in collection)


class AttachedCollection:
    """An attached Qdrant collection. Close it (or use ``with``) when done."""

    def __init__(
        self,
        *,
        settings: Settings,
        client: QdrantClient,
        url: str | None,
        path: str | None,
        api_key: str | None,
        report: CollectionReport,
        layout: Layout,
        vector: str | None,
        add_vector: str | None,
        name: str,
        shard_key: str | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        borrowed_client: bool = False,
    ) -> None:
        self.settings = settings
        self._borrowed_client = borrowed_client
        self.url, self.path, self._api_key = url, path, api_key
        self.where = url or str(path)
        self._client: QdrantClient | None = client
        self.report = report
        self.layout = layout
        self.name = name
        self._requested = vector
        self._add_vector = add_vector
        self.shard_key = shard_key
        self._embedder = embedder
        self._owns_embedder = embedder is None
        self._reranker = reranker
        self._rerank_budget = RerankBudget(self.settings.rerank_budget_ms)
        self._owns_reranker = reranker is None
        self._choice: VectorChoice | None = None
        self._probe: ModelProbe | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> AttachedCollection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._borrowed_client:
            self._release_client()
        self._client = None
        for part, owned in ((self._embedder, self._owns_embedder), (self._reranker, self._owns_reranker)):
            closer = getattr(part, "close", None)
            if owned and closer is not None:
                closer()
        self._embedder = self._reranker = None

    @property
    def client(self) -> QdrantClient:
        if self._client is None:
            self._client = open_client(self.url, self.path, self._api_key)
        return self._client

    def _release_client(self) -> None:
        """Embedded Qdrant allows one client per folder: let go before the facade opens its own."""
        if self._client is not None:
            if self._borrowed_client:
                raise ConfigError(
                    "this attachment borrows its Qdrant client; index through indexer.open_collection instead"
                )
            close_client(self._client)
            self._client = None

    # -- parts ---------------------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(self.settings)
        return self._embedder

    @property
    def reranker(self) -> Reranker | None:
        if self._reranker is None and self.settings.rerank_model:
            self._reranker = load_reranker(self.settings)
        return self._reranker

    # -- compatibility -------------------------------------------------------------------------------------
    @property
    def choice(self) -> VectorChoice:
        """The vector slot our model uses, checked against size, distance and datatype (raises when none fits)."""
        if self._choice is None:
            emb = self.embedder
            requested = self._requested
            if requested is None and self._add_vector is not None and self.report.vector(self._add_vector):
                requested = self._add_vector
            self._choice = choose_vector(
                self.report,
                dimensions=emb.dimensions,
                similarity=emb.similarity,
                model=emb.model_id,
                requested=requested,
            )
        return self._choice

    def probe(self) -> ModelProbe:
        """Whether the vectors already in our slot were made by our model (compares a few of them)."""
        if self._probe is None:
            self._probe = probe_model(self.client, self.where, self.report, self.layout, self.choice, self.embedder)
        return self._probe

    def check(self) -> dict[str, Any]:
        """The compatibility verdict as data (what `indexer qdrant inspect` prints)."""
        emb = self.embedder
        out: dict[str, Any] = {"model": emb.model_id, "dimensions": emb.dimensions, "similarity": emb.similarity}
        try:
            out["vector"] = self.choice.to_dict()
        except (ConfigError, CollectionMismatchError) as exc:
            out["vector"] = None
            out["problem"] = str(exc)
            return out
        out["probe"] = self.probe().to_dict()
        return out

    # -- search --------------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        candidates: int | None = None,
        filter: qm.Filter | Mapping[str, Any] | None = None,
        rerank: bool | None = None,
    ) -> AttachedResult:
        """Embed ``query``, query the chosen vector with ``filter`` (a Qdrant filter, passed through unchanged),
        rerank the candidates when a reranker is configured (or ``rerank=True``), return the top ``k``."""
        req = prepare(SearchRequest(query, k=k, candidates=candidates, rerank=rerank, mode="dense"),
                      QueryLimits.from_settings(self.settings))
        query, k = req.query, int(req.k or 0)
        reranker = self.reranker if rerank is not False else None
        limit = int(req.candidates or k) if reranker is not None else k
        qfilter = as_filter(filter)
        choice = self.choice
        emb = self.embedder

        t0 = time.perf_counter()
        # a query longer than the model's limit is searched, not refused: the prefix that fits (the main path's rule)
        vector = emb.embed_batch([fit_query(query, emb)], choice.normalization)[0]
        t1 = time.perf_counter()
        response = call(
            self.where,
            "search",
            lambda: self.client.query_points(
                self.report.name,
                query=vector.tolist(),
                using=choice.using,
                query_filter=qfilter,
                limit=limit,
                with_payload=True,
            ),
        )
        t2 = time.perf_counter()
        points = list(response.points)
        timings = {"embed": (t1 - t0) * 1000, "search": (t2 - t1) * 1000}
        stage = rerank_stage(
            query, [self.layout.text(p.payload or {}) for p in points], reranker, k=k, wanted=rerank,
            configured=bool(self.settings.rerank_model), budget=self._rerank_budget, fixed=req.rerank_candidates,
        )
        if stage.ran:
            timings["rerank"] = stage.ms
        timings["total"] = (time.perf_counter() - t0) * 1000
        hits = tuple(self._hit(points[i], score) for i, score in zip(stage.order, stage.scores, strict=True))
        return AttachedResult(hits, choice.name, stage.ran, stage.note, timings)

    def _hit(self, point: qm.ScoredPoint, rerank_score: float | None) -> AttachedHit:
        payload = dict(point.payload or {})
        return AttachedHit(
            id=point.id if isinstance(point.id, int) else str(point.id),
            score=float(point.score),
            rerank_score=None if rerank_score is None else float(rerank_score),
            text=self.layout.text(payload),
            metadata=self.layout.metadata(payload),
            source=self.layout.source(payload),
            ours=self.layout.is_ours(payload),
            payload=payload,
        )

    # -- index ---------------------------------------------------------------------------------------------
    def index(
        self, paths: Sequence[str | Path], progress: Progress | None = None, *, allow_other_model: bool = False
    ) -> IndexReport:
        """Index files into the collection as points in its own layout (our vector slot only). A first run that
        fails records nothing: the attachment it registered is removed again, with any point it wrote."""
        first = self._record() is None
        self.register(allow_other_model=allow_other_model)
        self._release_client()
        try:
            return index_paths(self.name, paths, self.settings, progress)
        except BaseException:
            if first:
                self._undo_registration()
            raise

    def _undo_registration(self) -> None:
        try:
            self.detach()
        except Exception as exc:  # the first error is the one to report
            logger.warning("could not undo the attachment %s after a failed first run: %s", self.name, exc)
        finally:
            self._release_client()

    def forget(self, path: str | Path) -> IndexReport:
        """Remove a root we indexed and every point of its files (ours only)."""
        self._require_record()
        self._release_client()
        return forget_path(self.name, path, self.settings)

    def detach(self) -> int:
        """Delete every point we wrote (found by our marker) and forget the attachment; returns points deleted."""
        store = AttachedStore(client=self.client, **self._store_options(None, ""))
        before = int(call(self.where, "count our points", lambda: self.client.count(
            self.report.name, store.ours_filter(), exact=True)).count)
        store.drop(self.name)
        remove_record(self.name, self.settings)
        return before

    def register(self, *, allow_other_model: bool = False) -> CollectionRecord:
        """Check compatibility and record the attachment in our state store (idempotent)."""
        existing = self._record()
        if existing is not None:
            self._check_record(existing)
            return existing
        self._maybe_add_vector()
        self.layout = self.layout.with_written_source()
        choice = self.choice
        probe = self.probe()
        if probe.scale is not None and not allow_other_model:
            raise CollectionMismatchError(f"not indexing into {self.report.name!r}: {probe.scale}; or pass "
                                          "--allow-other-model if you know better")
        if probe.verdict == "other" and not allow_other_model:
            raise CollectionMismatchError(
                f"the vectors in {choice.label} of {self.report.name!r} were made by another model than "
                f"{self.embedder.model_id} (mean cosine {probe.agreement} over {probe.compared} of their texts): our "
                "points would not be comparable with theirs. Use their model (--model), another vector, or pass "
                "--allow-other-model if you know better"
            )
        emb = self.embedder
        rec = CollectionRecord(
            name=self.name,
            store=STORE_NAME,
            store_options=self._store_options(choice, emb.model_id),
            metric=choice.metric,
            model_id=emb.model_id,
            model_path=self._model_path(),
            normalization=choice.normalization,
            dimensions=emb.dimensions,
        )
        add_record(rec, self.settings)
        logger.info("attached %s (%s, vector %s) as %s", self.report.name, self.where, choice.label, self.name)
        return rec

    def _model_path(self) -> str:
        path = getattr(self.embedder, "model_path", None)
        if path:
            return str(path)
        return str(resolve_model(self.settings.embed_model))

    def _store_options(self, choice: VectorChoice | None, model_id: str) -> dict[str, Any]:
        options: dict[str, Any] = {
            "collection": self.report.name,
            "vector": choice.name if choice else "",
            "layout": self.layout.to_dict(),
            "marker": self.name,
        }
        if self.shard_key:  # a custom-sharded collection's writes name a shard key (sharding.py)
            options["shard_key"] = self.shard_key
        if self.url is not None:
            options["url"] = self.url
        else:
            options["qdrant_path"] = self.path
        if choice is not None:
            options["meta"] = {
                "indexer.model_id": model_id,
                "indexer.normalization": normalization_name(choice.normalization),
                "indexer.metric": choice.metric,
                "dimensions": str(choice.size),
            }
            tokenizer = getattr(self.embedder, "tokenizer_mode", None)  # how our queries become tokens (recorded)
            if tokenizer:
                options["meta"]["indexer.tokenizer"] = str(tokenizer)
        return options

    def _record(self) -> CollectionRecord | None:
        return get_record(self.name, self.settings)

    def _require_record(self) -> CollectionRecord:
        rec = self._record()
        if rec is None:
            raise InputError(f"nothing was indexed into {self.report.name!r} as {self.name!r}; index files first")
        self._check_record(rec)
        return rec

    def _check_record(self, rec: CollectionRecord) -> None:
        opts = rec.store_options
        where = opts.get("url") or opts.get("qdrant_path")
        if rec.store != STORE_NAME or opts.get("collection") != self.report.name or where != self.where:
            raise ConfigError(
                f"the name {self.name!r} is already used by {rec.store} collection "
                f"{opts.get('collection', rec.name)!r} at {where or 'our data directory'}; attach under another "
                "name (--as NAME)"
            )
        asked = self._requested if self._requested is not None else self._add_vector
        if asked is not None and asked != opts.get("vector"):
            raise ConfigError(
                f"{self.name!r} writes into vector {opts.get('vector') or '(unnamed)'} of {self.report.name!r}; to use "
                f"vector {asked or '(unnamed)'} instead, detach first (`indexer qdrant detach`) or attach under "
                "another name (--as NAME)"
            )
        layout = Layout.from_dict(opts["layout"])
        if (layout.kind, layout.text_field, layout.metadata_field) != (
            self.layout.kind,
            self.layout.text_field,
            self.layout.metadata_field,
        ):
            logger.warning("using the layout recorded at attach time (%s), not %s", layout.kind, self.layout.kind)
            self.layout = layout

    def _maybe_add_vector(self) -> None:
        name = self._add_vector
        if name is None or self.report.vector(name) is not None or self._requested is not None:
            return
        if not self.report.named_vectors:
            raise ConfigError(
                f"collection {self.report.name!r} has one unnamed vector; adding a named vector would turn its "
                "configuration into named vectors, which clients written for it may reject. Refused: use a model "
                "that fits its vector, or a collection of our own"
            )
        if not hasattr(self.client, "create_vector_name"):
            raise ConfigError("adding a named vector needs qdrant-client >= 1.18 (pip install -U qdrant-client)")
        emb = self.embedder
        metric = self.settings.metric
        distance = {"cosine": qm.Distance.COSINE, "dot": qm.Distance.DOT, "euclid": qm.Distance.EUCLID}.get(metric)
        if distance is None:
            raise ConfigError(f"metric {metric!r} cannot be used for an added vector; use cosine, dot or euclid")
        config = qm.DenseVectorNameConfig(dense=qm.DenseVectorConfig(size=emb.dimensions, distance=distance))
        try:
            call(
                self.where,
                f"add vector {name!r}",
                lambda: self.client.create_vector_name(self.report.name, name, config),
            )
        except StoreError as exc:
            raise StoreError(f"{exc}; adding a named vector needs Qdrant server >= 1.18") from exc
        logger.info("added named vector %r (%d dims, %s) to %s", name, emb.dimensions, metric, self.report.name)
        self.report, _ = inspect_collection(self.client, self.report.name, self.where, self.report.sample_size or 1)
        self._requested = name
        self._choice = self._probe = None


def as_filter(value: qm.Filter | Mapping[str, Any] | None) -> qm.Filter | None:
    """A Qdrant filter as given (a models.Filter, or its JSON form as a dict), validated but not changed."""
    if value is None or isinstance(value, qm.Filter):
        return value
    if not isinstance(value, Mapping):
        raise InputError(f"a Qdrant filter is a dict or qdrant_client.models.Filter, not {type(value).__name__}")
    try:
        return qm.Filter.model_validate(dict(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InputError(
            f"invalid Qdrant filter at {where or 'top level'}: {first.get('msg')}; see Qdrant's filter documentation"
        ) from exc
