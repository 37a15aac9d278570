"""``POST /collections/{name}/points/query``: Qdrant's query API on our service, plus text queries and reranking.

An existing Qdrant client pointed at our URL gains text queries without code changes beyond the query itself::

    client = QdrantClient(url="http://127.0.0.1:8480", cloud_inference=True)   # sends Documents as they are
    client.query_points("docs", query=models.Document(text="rotate keys", model="indexer",
                                                      options={"rerank": True, "candidates": 50}),
                        query_filter=models.Filter(...), limit=5)

Accepted text queries: ``{"query": {"nearest": {"text": ...}}}`` (what qdrant-client sends for a Document) and
``{"query": {"text": ...}}``; options come from the Document's ``options`` (``rerank``, ``candidates``) or, for
raw HTTP, from top-level ``"rerank"``/``"candidates"``. ``filter`` is passed to Qdrant unchanged, ``using`` picks
the vector, ``limit`` and ``with_payload`` work as in Qdrant. Answers have Qdrant's shape (``result.points`` of
scored points, ``status``, ``time``); a point's ``score`` is the rerank score when the query was reranked
(points also carry ``vector_score`` and ``rerank_score``, which qdrant-client ignores).

Every other query (vectors, ids, fusion, prefetch, ...) is forwarded unchanged to the real Qdrant server of the
collection, or refused with a clear 400 when the collection lives in an embedded Qdrant folder.

``{name}`` is an attachment made with ``indexer qdrant index`` (its name, e.g. ``qdrant.docs``, or its Qdrant
collection name), or else a collection on the server of the ``qdrant_url`` setting.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from indexer.plugin_api import (
    COLLECTION_NAME_RULE,
    CollectionMismatchError,
    ConfigError,
    IndexerError,
    InputError,
    Settings,
    StoreError,
    StoreUnavailableError,
    valid_collection_name,
)
from indexer.plugin_api.collections import list_collections
from plugins.qdrant_attach import qdrant_api
from plugins.qdrant_attach.api import STORE_NAME, AttachedCollection, attach
from plugins.qdrant_attach.attached_store import AttachedStore
from plugins.qdrant_attach.layout import get_path, set_path
from plugins.qdrant_attach.qdrant_api import attachment_names

logger = logging.getLogger(__name__)

T = TypeVar("T")
Runner = Callable[[Callable[[], Any]], Awaitable[Any]]
_SUPPORTED = {"query", "using", "filter", "limit", "with_payload", "with_vector", "offset", "params", "shard_key"}


class NotFound(IndexerError):
    """No attachment or server collection by that name."""


class QdrantStatus(BaseModel):
    error: str


class QdrantErrorOut(BaseModel):
    """Qdrant's error shape (what qdrant-client shows in UnexpectedResponse)."""

    status: QdrantStatus
    time: float


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": QdrantErrorOut, "description": "bad query (the message names the field and the fix)"},
    404: {"model": QdrantErrorOut, "description": "no attachment or server collection by that name"},
    502: {"model": QdrantErrorOut, "description": "Qdrant refused or failed"},
    503: {"model": QdrantErrorOut, "description": "Qdrant unreachable, or the server is overloaded (Retry-After)"},
}
_TEXT = {"type": "string", "description": "the text query, embedded by the service"}
_OPTIONS = {
    "type": "object",
    "properties": {"rerank": {"type": "boolean"}, "candidates": {"type": "integer", "minimum": 1}},
}
_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {
            "type": "object",
            "description": "Qdrant's QueryRequest. A text query is {'query': {'text': ...}} or {'query': {'nearest': "
            "{'text': ..., 'options': {'rerank': true}}}}; any other query is forwarded to Qdrant unchanged",
            "properties": {
                "query": {"anyOf": [
                    {"type": "object", "properties": {"text": _TEXT, "options": _OPTIONS}, "required": ["text"]},
                    {"type": "object", "required": ["nearest"], "properties": {"nearest": {
                        "type": "object", "properties": {"text": _TEXT, "options": _OPTIONS}, "required": ["text"],
                    }}},
                    {"description": "any other Qdrant query (forwarded)"},
                ]},
                "filter": {"type": "object", "description": "a Qdrant filter, passed to Qdrant unchanged"},
                "using": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1},
                "with_payload": {"anyOf": [
                    {"type": "boolean"}, {"type": "array", "items": {"type": "string"}},
                    {"type": "object", "properties": {
                        "include": {"type": "array", "items": {"type": "string"}},
                        "exclude": {"type": "array", "items": {"type": "string"}},
                    }},
                ]},
                "rerank": {"type": "boolean"},
                "candidates": {"type": "integer", "minimum": 1},
            },
        }}},
    }
}


class QueryEndpoint:
    """Resolves names to attachments and runs text queries. Everything but ``forward`` runs on one thread (the
    server's model worker), which owns the cached attachments and their models."""

    def __init__(self, settings: Settings, reader: Callable[[str], Any] | None = None) -> None:
        self.settings = settings
        self.reader = reader  # the server's query-side Collection for a name, to share its models and client
        self._attached: dict[str, AttachedCollection] = {}
        self.answer_query: Any = None  # set by qdrant_api.add_routes: forward, or answer from the embedded folder

    def location(self, name: str) -> tuple[str | None, str | None, str | None]:
        """(attachment name, server URL, embedded folder) for ``name``; NotFound when there is none."""
        recs = [r for r in list_collections(self.settings) if r.store == STORE_NAME]
        exact = [r for r in recs if r.name == name] or [r for r in recs if r.store_options.get("collection") == name]
        if len(exact) > 1:
            raise InputError(
                f"{name!r} is attached several times ({', '.join(r.name for r in exact)}); query one of those names"
            )
        if exact:
            opts = exact[0].store_options
            return exact[0].name, opts.get("url"), opts.get("qdrant_path")
        if self.settings.qdrant_url:
            return None, self.settings.qdrant_url, None
        raise NotFound(
            f"no attached Qdrant collection {name!r}; attach it with `indexer qdrant index {name} PATH --url ...` "
            "or set qdrant_url to query collections of a Qdrant server"
        )

    def target(self, name: str) -> str:
        """The Qdrant collection name behind ``name`` (an attachment's, or ``name`` itself on the server)."""
        rec_name, _, _ = self.location(name)
        if rec_name is None:
            return name
        rec = next(r for r in list_collections(self.settings) if r.name == rec_name)
        return str(rec.store_options["collection"])

    def collection_names(self) -> list[str]:
        return attachment_names(self.settings, STORE_NAME)

    def embedded(self, name: str, local: Callable[[Any, str], Any]) -> Any:
        """Run ``local(client, collection)`` on the embedded folder's one client (this thread owns it); what the
        embedded engine refuses is the request's fault (a 400 naming why)."""
        col = self._attachment(name)
        try:
            return local(col.client, col.report.name)
        except (ValueError, KeyError, TypeError, AssertionError) as exc:
            raise InputError(f"Qdrant (embedded, {col.where}) refused the request: {exc}") from exc

    def translate(self, exc: Exception, started: float) -> JSONResponse:
        """NotFound -> 404, the service's overload signal (anything with retry_after) -> 503; else re-raised."""
        if isinstance(exc, NotFound):
            return _error(404, str(exc), started)
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is None:
            raise exc
        answer = _error(503, str(exc), started)
        answer.headers["Retry-After"] = str(retry_after)
        return answer

    def _attachment(self, name: str) -> AttachedCollection:
        col = self._attached.get(name)
        if col is not None:
            return col
        rec_name, url, path = self.location(name)
        shared: dict[str, Any] = {}
        target = name
        if rec_name is not None:
            rec = next(r for r in list_collections(self.settings) if r.name == rec_name)
            opts = rec.store_options
            target = opts["collection"]
            layout = opts.get("layout", {})
            shared = {
                "vector": opts.get("vector", ""),
                "layout": layout.get("kind"),
                "text_field": layout.get("text_field"),
                "metadata_field": layout.get("metadata_field") or "",
                "source_field": layout.get("source_field") or "",
                "as_name": rec_name,
            }
            if self.reader is not None:
                reader = self.reader(rec_name)
                shared["embedder"] = reader.embedder
                shared["reranker"] = reader.reranker
                if isinstance(reader.store, AttachedStore):
                    shared["client"] = reader.store.client  # an embedded folder admits one client
        col = attach(target, url=url, path=path, settings=self.settings, **shared)
        self._attached[name] = col
        return col

    def text_query(self, name: str, text: str, body: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
        col = self._attachment(name)
        using = body.get("using")
        if using is not None and using != col.choice.name:
            raise InputError(
                f"{name!r} is searched through vector {col.choice.label}; 'using' asked for {using!r}. Attach it "
                "with --vector to use another vector"
            )
        result = col.search(
            text,
            k=int(body.get("limit") or 10),
            candidates=options.get("candidates"),
            filter=body.get("filter"),
            rerank=options.get("rerank"),
        )
        with_payload = body.get("with_payload", True)
        points = []
        for hit in result.hits:
            payload = dict(hit.payload) if with_payload is True else _select(hit.payload, with_payload)
            points.append({
                "id": hit.id,
                "version": 0,
                "score": hit.rerank_score if hit.rerank_score is not None else hit.score,
                "payload": payload,
                "vector": None,
                "vector_score": hit.score,
                "rerank_score": hit.rerank_score,
            })
        return {"points": points}

    def close(self) -> None:
        for col in self._attached.values():
            col.close()
        self._attached.clear()


def _select(payload: Mapping[str, Any], spec: Any) -> dict[str, Any] | None:
    """Qdrant's ``with_payload``: false, a list of keys, or {"include": [...]} / {"exclude": [...]}. Keys are
    dotted paths, as in Qdrant: ``metadata.source`` returns ``{"metadata": {"source": ...}}``."""
    if spec is False or spec is None:
        return None
    if isinstance(spec, dict) and "include" in spec:
        spec = spec["include"]
    if isinstance(spec, str):
        spec = [spec]
    if isinstance(spec, list):
        out: dict[str, Any] = {}
        for key in spec:
            if not isinstance(key, str):
                continue
            value = get_path(payload, key)
            if value is not None or _has_path(payload, key):
                set_path(out, key, copy.deepcopy(value))
        return out
    if isinstance(spec, dict) and "exclude" in spec:
        kept = copy.deepcopy(dict(payload))
        for key in spec["exclude"] if isinstance(spec["exclude"], list) else []:
            if isinstance(key, str):
                _drop_path(kept, key)
        return kept
    return dict(payload)


def _has_path(payload: Mapping[str, Any], dotted: str) -> bool:
    head, _, rest = dotted.rpartition(".")
    parent = get_path(payload, head) if head else payload
    return isinstance(parent, Mapping) and rest in parent


def _drop_path(payload: dict[str, Any], dotted: str) -> None:
    head, _, rest = dotted.rpartition(".")
    parent = get_path(payload, head) if head else payload
    if isinstance(parent, dict):
        parent.pop(rest, None)


def parse_text_query(body: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(text, options) when the body asks for a text query; None for every other query."""
    query = body.get("query")
    if isinstance(query, Mapping) and isinstance(query.get("nearest"), Mapping):
        query = query["nearest"]
    if not isinstance(query, Mapping) or not isinstance(query.get("text"), str):
        return None
    options = dict(query.get("options") or {})
    for key in ("rerank", "candidates"):
        if key in body and key not in options:
            options[key] = body[key]
    if "rerank" in options and not isinstance(options["rerank"], bool):
        raise InputError("'rerank' is true or false")
    if options.get("candidates") is not None and not isinstance(options["candidates"], int):
        raise InputError("'candidates' is an integer")
    limit = body.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InputError("'limit' is a positive integer")
    unsupported = sorted(set(body) - _SUPPORTED - {"rerank", "candidates"})
    if unsupported:
        raise InputError(
            f"text queries do not support {', '.join(unsupported)}; send a vector query for those (it is forwarded "
            "to Qdrant unchanged)"
        )
    if body.get("with_vector"):
        raise InputError("text queries do not return vectors (with_vector); read them from Qdrant directly")
    if body.get("offset"):
        raise InputError("text queries do not support offset; raise limit instead")
    return query["text"], options


def build_router(
    settings: Settings,
    run: Runner,
    reader: Callable[[str], Any] | None = None,
    endpoint: QueryEndpoint | None = None,
) -> APIRouter:
    """The router. ``run(fn)`` runs ``fn`` on the thread that owns the models (the server's model worker);
    ``reader(name)`` returns the server's query-side Collection of an attachment, to share its models and its
    Qdrant client. Pass your own ``endpoint`` to close its attachments (``endpoint.close()``) on shutdown."""
    endpoint = endpoint or QueryEndpoint(settings, reader)
    router = APIRouter(tags=["qdrant"])

    @router.post(
        "/collections/{name}/points/query",
        summary="Qdrant's query API, plus text queries ({'query': {'text': ...}}) and reranking",
        responses=_ERRORS,
        openapi_extra=_BODY,
    )
    async def query_points(name: str, request: Request) -> JSONResponse:
        started = time.perf_counter()
        if not valid_collection_name(name):
            return _error(400, f"{name[:200]!r} is not a collection name: {COLLECTION_NAME_RULE}", started)
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body is not JSON", started)
        except RecursionError:
            return _error(400, "the body is nested too deeply", started)
        if not isinstance(body, dict):
            return _error(400, "the body is a JSON object, as for Qdrant's query API", started)
        try:
            parsed = parse_text_query(body)
            if parsed is None:  # any other query: forwarded to its server, or answered from its embedded folder
                return await endpoint.answer_query(
                    name, started, lambda: endpoint.embedded(name, qdrant_api.query(body)), "POST", "/points/query",
                    body,
                )
            text, options = parsed
            result = await run(lambda: endpoint.text_query(name, text, body, options))
        except NotFound as exc:
            return _error(404, str(exc), started)
        except (InputError, ConfigError, CollectionMismatchError) as exc:
            return _error(400, str(exc), started)
        except StoreUnavailableError as exc:
            return _error(503, str(exc), started)
        except StoreError as exc:
            return _error(502, str(exc), started)
        except RecursionError:
            return _error(400, "the query is nested too deeply", started)
        except Exception as exc:  # the service's overload signal (anything with retry_after): Qdrant-shaped 503
            return endpoint.translate(exc, started)
        return JSONResponse({"result": result, "status": "ok", "time": time.perf_counter() - started})

    qdrant_api.add_routes(router, endpoint, run)  # after /points/query: the catch-all comes last
    return router


_error = qdrant_api.error


def router_for_service(service: Any) -> APIRouter:
    """Entry point ``indexer.routers: qdrant``: the router on the HTTP service's model worker and readers."""
    return build_router(service.settings, service.worker.run, service.reader)
