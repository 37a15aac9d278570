"""The rest of Qdrant's read API that clients call, for attached collections: what qdrant-client's
``get_collections``, ``collection_exists``, ``get_collection``, ``count``, ``scroll``, ``retrieve`` and (vector)
``query_points`` send, answered in Qdrant's own shapes, so a program that uses qdrant-client works against our URL.

Each request is forwarded unchanged to the attachment's Qdrant server (with its API key), or, for an attachment
in an embedded folder, answered from that folder through the one client this process holds on it. Everything
else under ``/collections/{name}/...`` is refused in Qdrant's error shape (writes go through `indexer qdrant`).

``GET /collections`` and ``GET /`` are the service's own routes (our collections, the search page); they answer in
Qdrant's shape only to a Qdrant client (its ``User-Agent``: qdrant-client sends ``python-client/...``) or when asked
with ``?format=qdrant``.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from qdrant_client import models as qm
from starlette.routing import Match

from indexer.plugin_api import (
    COLLECTION_NAME_RULE,
    CollectionMismatchError,
    ConfigError,
    InputError,
    StoreError,
    StoreUnavailableError,
    valid_collection_name,
)
from indexer.plugin_api.collections import list_collections
from plugins.qdrant_attach.attached_store import api_key_for

if TYPE_CHECKING:
    from indexer.plugin_api import Settings


class QueryEndpoint(Protocol):
    """What these routes ask of :class:`plugins.qdrant_attach.http.QueryEndpoint` (named here, so the two modules
    do not import each other)."""

    settings: Settings
    answer_query: Any

    def location(self, name: str) -> tuple[str | None, str | None, str | None]: ...

    def target(self, name: str) -> str: ...

    def collection_names(self) -> list[str]: ...

    def embedded(self, name: str, local: Callable[[Any, str], Any]) -> Any: ...

    def translate(self, exc: Exception, started: float) -> JSONResponse: ...

Runner = Callable[[Callable[[], Any]], Awaitable[Any]]
SERVED = ("get_collections", "collection_exists", "get_collection", "count", "scroll", "retrieve", "query_points")


def is_qdrant_client(scope: Any) -> bool:
    """A request from a Qdrant client library (or one that asks for Qdrant's shape with ?format=qdrant)."""
    if b"format=qdrant" in scope.get("query_string", b""):
        return True
    for key, value in scope.get("headers", []):
        if key == b"user-agent":
            agent = value.lower()
            return agent.startswith(b"python-client/") or b"qdrant" in agent
    return False


class QdrantClientsOnly(APIRoute):
    """A route that matches only requests from Qdrant clients (the service's own route answers the others)."""

    def matches(self, scope: Any) -> tuple[Match, Any]:
        match, child = super().matches(scope)
        if match is not Match.NONE and not is_qdrant_client(scope):
            return Match.NONE, {}
        return match, child


class NotTheServiceRoutes(APIRoute):
    """The catch-all under /collections/{name}/: never the service's own ``POST /collections/{name}/sync``."""

    def matches(self, scope: Any) -> tuple[Match, Any]:
        match, child = super().matches(scope)
        if match is not Match.NONE and child.get("path_params", {}).get("rest") == "sync":
            return Match.NONE, {}
        return match, child


def add_routes(router: APIRouter, endpoint: QueryEndpoint, run: Runner) -> None:
    async def answer(name: str, started: float, local: Callable[[], Any], method: str, rest: str,
                     body: Any = None) -> JSONResponse:
        """Forward to the attachment's server, or run ``local`` (on the thread that owns the embedded client)."""
        if not valid_collection_name(name):
            return error(400, f"{name[:200]!r} is not a collection name: {COLLECTION_NAME_RULE}", started)
        try:
            rec_name, url, _ = await run(lambda: endpoint.location(name))
            if url is not None:
                target = await run(lambda: endpoint.target(name))
                return await forward(endpoint, url, method, f"/collections/{target}{rest}", body, started)
            result = await run(local)
        except (ValidationError, InputError, ConfigError, CollectionMismatchError) as exc:
            return error(400, _message(exc), started)
        except StoreUnavailableError as exc:
            return error(503, str(exc), started)
        except StoreError as exc:
            return error(502, str(exc), started)
        except Exception as exc:  # NotFound, or the service's overload signal (retry_after)
            return endpoint.translate(exc, started)
        return JSONResponse({"result": result, "status": "ok", "time": time.perf_counter() - started})

    async def json_body(request: Request) -> Any:
        try:
            raw = await request.body()
            return {} if not raw.strip() else await request.json()
        except (ValueError, RecursionError) as exc:
            raise InputError("the body is not JSON (or is nested too deeply)") from exc

    async def server_version() -> dict[str, str]:
        """What qdrant-client's compatibility check reads: the embedded engine's version (qdrant-client's)."""
        return {"title": "indexer (Qdrant read API for attached collections)",
                "version": importlib.metadata.version("qdrant-client")}

    async def get_collections() -> JSONResponse:
        """The attached collections, and those of the ``qdrant_url`` server when one is set."""
        started = time.perf_counter()
        names = set(await run(endpoint.collection_names))
        url = endpoint.settings.qdrant_url
        if url:
            listed = await forward(endpoint, url, "GET", "/collections", None, started)
            if listed.status_code != 200:
                return listed
            body = json.loads(bytes(listed.body))
            names |= {str(c.get("name")) for c in (body.get("result") or {}).get("collections", []) if c.get("name")}
        return JSONResponse({"result": {"collections": [{"name": n} for n in sorted(names)]}, "status": "ok",
                             "time": time.perf_counter() - started})

    for path, handler in (("/", server_version), ("/collections", get_collections)):
        router.add_api_route(path, handler, methods=["GET"], include_in_schema=False,
                             route_class_override=QdrantClientsOnly)

    @router.get("/collections/{name}/exists", include_in_schema=False)
    async def collection_exists(name: str) -> JSONResponse:
        started = time.perf_counter()
        try:
            await run(lambda: endpoint.location(name))
        except Exception as exc:
            if type(exc).__name__ == "NotFound":
                return JSONResponse({"result": {"exists": False}, "status": "ok", "time": 0.0})
            return endpoint.translate(exc, started)
        return await answer(name, started, lambda: {"exists": True}, "GET", "/exists")

    @router.get("/collections/{name}", summary="Qdrant's collection info (attached collections)", tags=["qdrant"])
    async def get_collection(name: str) -> JSONResponse:
        started = time.perf_counter()
        return await answer(name, started, lambda: endpoint.embedded(name, _info), "GET", "")

    @router.post("/collections/{name}/points/count", summary="Qdrant's count (attached collections)",
                 tags=["qdrant"], openapi_extra=_object_body("Qdrant's CountRequest"))
    async def count(name: str, request: Request) -> JSONResponse:
        return await read_with_body(name, request, _count, "/points/count")

    @router.post("/collections/{name}/points/scroll", summary="Qdrant's scroll (attached collections)",
                 tags=["qdrant"], openapi_extra=_object_body("Qdrant's ScrollRequest"))
    async def scroll(name: str, request: Request) -> JSONResponse:
        return await read_with_body(name, request, _scroll, "/points/scroll")

    @router.post("/collections/{name}/points", summary="Qdrant's retrieve by ids (attached collections)",
                 tags=["qdrant"], openapi_extra=_object_body("Qdrant's PointRequest"))
    async def retrieve(name: str, request: Request) -> JSONResponse:
        return await read_with_body(name, request, _retrieve, "/points")

    async def read_with_body(name: str, request: Request, read: Any, path: str) -> JSONResponse:
        """A read whose request body says what to read: 400 in Qdrant's shape for a bad body."""
        started = time.perf_counter()
        try:
            body = await json_body(request)
        except InputError as exc:
            return error(400, str(exc), started)
        return await answer(name, started, lambda: endpoint.embedded(name, read(body)), "POST", path, body)

    async def refused(name: str, rest: str, request: Request) -> JSONResponse:
        return error(
            404,
            f"{request.method} /collections/{name[:200]}{'/' + rest[:200] if rest else ''} is not served here; for "
            "attached collections "
            f"this service answers {', '.join(SERVED)} (writes: `indexer qdrant index`)",
            time.perf_counter(),
        )

    router.add_api_route("/collections/{name}/{rest:path}", refused, methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                         include_in_schema=False, route_class_override=NotTheServiceRoutes)

    async def refused_collection(name: str, request: Request) -> JSONResponse:
        return await refused(name, "", request)

    router.add_api_route("/collections/{name}", refused_collection, methods=["POST", "PUT", "PATCH", "DELETE"],
                         include_in_schema=False)

    endpoint.answer_query = answer  # the vector queries of /points/query take the same path


def _object_body(description: str) -> dict[str, Any]:
    return {"requestBody": {"required": False, "content": {"application/json": {"schema": {
        "type": "object", "description": description}}}}}


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"invalid request at {where or 'top level'}: {first.get('msg')}"
    return str(exc)


# -- answered from an embedded folder (on the thread that owns its client) --------------------------------------
Local = Callable[[Any, str], Any]  # (client, Qdrant collection name) -> the "result" of Qdrant's answer


def _info(client: Any, target: str) -> Any:
    return client.get_collection(target).model_dump(mode="json")


def _count(body: Any) -> Local:
    req = qm.CountRequest.model_validate(body)
    return lambda client, target: {"count": client.count(target, count_filter=req.filter,
                                                         exact=True if req.exact is None else req.exact).count}


def _scroll(body: Any) -> Local:
    req = qm.ScrollRequest.model_validate(body)

    def go(client: Any, target: str) -> Any:
        records, next_offset = client.scroll(
            target, scroll_filter=req.filter, limit=req.limit or 10, offset=req.offset,
            with_payload=True if req.with_payload is None else req.with_payload,
            with_vectors=False if req.with_vector is None else req.with_vector, order_by=req.order_by,
        )
        return {"points": [r.model_dump(mode="json") for r in records], "next_page_offset": next_offset}

    return go


def _retrieve(body: Any) -> Local:
    req = qm.PointRequest.model_validate(body)

    def go(client: Any, target: str) -> Any:
        records = client.retrieve(
            target, ids=req.ids, with_payload=True if req.with_payload is None else req.with_payload,
            with_vectors=False if req.with_vector is None else req.with_vector,
        )
        return [r.model_dump(mode="json") for r in records]

    return go


def query(body: Any) -> Local:
    req = qm.QueryRequest.model_validate(body)

    def go(client: Any, target: str) -> Any:
        response = client.query_batch_points(target, requests=[req])[0]
        return {"points": [p.model_dump(mode="json") for p in response.points]}

    return go


# -- forwarded to a server -------------------------------------------------------------------------------------
async def forward(endpoint: QueryEndpoint, url: str, method: str, path: str, body: Any, started: float) -> JSONResponse:
    key = api_key_for(url, endpoint.settings)
    headers = {"api-key": key} if key else {}
    try:
        async with httpx.AsyncClient(timeout=30.0) as client:
            got = await client.request(
                method, f"{url.rstrip('/')}{path}", json=body if method != "GET" else None, headers=headers
            )
    except httpx.HTTPError as exc:
        return error(503, f"cannot reach Qdrant at {url} to forward the request: {exc}", started)
    try:
        content = got.json()
    except ValueError:
        content = {"status": {"error": got.text[:500]}, "time": time.perf_counter() - started}
    return JSONResponse(content, status_code=got.status_code)


def error(status: int, message: str, started: float) -> JSONResponse:
    """Qdrant's error shape, so qdrant-client shows the message."""
    return JSONResponse({"status": {"error": message}, "time": time.perf_counter() - started}, status_code=status)


def attachment_names(settings: Any, store_name: str) -> list[str]:
    """The Qdrant collection names of the attachments (each once)."""
    names = [r.store_options.get("collection") for r in list_collections(settings) if r.store == store_name]
    return sorted({str(n) for n in names if n})
