"""The HTTP app: ``create_app(settings)`` builds a FastAPI app over one :class:`~indexer.server.service.Service`.

Routes stay thin: parse the body, call the service (which calls the facade on the model worker), shape the
answer. Every error is JSON ``{"error": {"message", "type", ...}}`` (the OpenAI shape) without a stack trace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from indexer.codec import result_json
from indexer.core import caller, registry
from indexer.core.location import COLLECTION_NAME_RULE, COLLECTION_PATTERN, valid_collection_name
from indexer.errors import (
    CollectionMismatchError,
    IndexerError,
    InputError,
    LockedError,
    NotFoundError,
    StoreUnavailableError,
)
from indexer.server import schemas
from indexer.server.metrics import PROMETHEUS_CONTENT_TYPE
from indexer.server.security import (
    LOOPBACK_NAMES,
    AuthMiddleware,
    BodyLimitMiddleware,
    HostMiddleware,
    HostPolicy,
    KeyRing,
    default_allowed_hosts,
)
from indexer.server.service import Service, search_request
from indexer.server.worker import Overloaded
from indexer.settings import Settings, load_settings
from indexer.types import MAX_QUERY_CHARS

logger = logging.getLogger(__name__)

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": schemas.ErrorOut, "description": "bad input (the message names the problem and the fix)"},
    401: {"model": schemas.ErrorOut, "description": "missing or invalid API key"},
    404: {"model": schemas.ErrorOut, "description": "unknown collection, model or file"},
    413: {"model": schemas.ErrorOut, "description": "request body too large (max_body_bytes; with an image: "
          "max_image_body_bytes)"},
    415: {"model": schemas.ErrorOut, "description": "the body is not sent as JSON (Content-Type: application/json)"},
    422: {"model": schemas.ErrorOut, "description": "the body does not match the schema"},
    503: {"model": schemas.ErrorOut, "description": "overloaded or not ready; see Retry-After"},
}


class IndexerApp(FastAPI):
    """FastAPI with the host check and the body cap outside everything else (so a request for another host is
    refused before anything runs, and even a streamed oversize body gets 413)."""

    max_body_bytes: int = 1024 * 1024
    max_image_body_bytes: int = 32 * 1024 * 1024
    hosts: HostPolicy = HostPolicy(LOOPBACK_NAMES)

    def build_middleware_stack(self) -> Any:
        inner = BodyLimitMiddleware(super().build_middleware_stack(), self.max_body_bytes, self.max_image_body_bytes)
        return HostMiddleware(inner, self.hosts)


def create_app(
    settings: Settings | None = None,
    *,
    service: Service | None = None,
    extra_admin_keys: tuple[str, ...] = (),
    warm_up: bool = True,
    watch: bool = False,
    mcp: bool = True,
) -> FastAPI:
    """The app. ``extra_admin_keys``: e.g. the token announced in the data directory for the local CLI."""
    settings = settings or load_settings()
    svc = service or Service(settings)
    mcp_server = None
    if mcp:
        from indexer.server.mcp import build_mcp

        mcp_server = build_mcp(svc)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if warm_up:
            import asyncio

            await asyncio.to_thread(svc.warm_up)
        else:
            svc.ready = True
        if watch:
            from indexer.server.watchers import start_watchers

            start_watchers(svc)
        try:
            if mcp_server is not None:
                async with mcp_server.session_manager.run():
                    yield
            else:
                yield
        finally:
            import asyncio

            await asyncio.to_thread(svc.close)

    app = IndexerApp(
        title="indexer",
        version=_version(),
        description="Search local documents (llama.cpp embeddings + reranking); OpenAI- and Cohere-style "
        "/v1 endpoints; MCP at /mcp.",
        lifespan=lifespan,
        docs_url=None,  # served below from the package's own Swagger UI files: /docs works offline
        redoc_url=None,
    )
    app.max_body_bytes = settings.max_body_bytes
    app.max_image_body_bytes = settings.max_image_body_bytes
    app.hosts = HostPolicy(
        settings.allowed_hosts or default_allowed_hosts(settings.server_host), settings.trust_forwarded_host
    )
    app.state.service = svc
    keys = KeyRing(settings.api_keys, settings.admin_api_keys, extra_admin_keys)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
        )
    app.add_middleware(AuthMiddleware, keys=keys)
    _install_error_handlers(app, svc)
    app.add_middleware(TimingMiddleware, svc=svc)
    app.add_middleware(CallerMiddleware)
    from indexer.server.v1 import add_v1_routes

    # Plugin routers (e.g. Qdrant's API) come before ours, so a plugin route may answer some requests of one of our
    # paths (routes that match only their own clients, like Qdrant clients' GET /collections); others fall through.
    for factory in registry.load_all("indexer.routers").values():
        app.include_router(factory(svc))
    router = APIRouter(responses=ERRORS)  # our error shape, documented on our routes (plugins document theirs)
    _add_routes(router)
    add_v1_routes(router)
    app.router.routes.extend(router.routes)  # plain APIRoutes on the app (each carries ERRORS in its responses)
    if mcp_server is not None:
        _add_mcp_route(app, mcp_server, settings)
    return app


def _add_mcp_route(app: FastAPI, mcp_server: Any, settings: Settings) -> None:
    """Serve MCP's streamable HTTP transport at exactly ``/mcp`` (stateless, JSON answers) on this app, behind
    the same API keys and the same host check as every route (``HostMiddleware``: the one host rule, which also
    knows reverse proxies), so the SDK's own Host check is off."""
    from mcp.server.transport_security import TransportSecuritySettings

    inner = mcp_server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        max_request_body_size=max(settings.max_body_bytes, settings.max_image_body_bytes),  # ours caps first
        host=settings.server_host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    route = next(r for r in inner.routes if getattr(r, "path", None) == "/mcp")
    app.router.routes.append(route)


def _version() -> str:
    from indexer import __version__

    return __version__


# -- routes ------------------------------------------------------------------------------------------------------
AFFINITY_HEADER = b"x-qdrant-route-affinity"  # a caller's own mark (CallerMiddleware)
DOCS_ASSETS = "/static/docs"  # public (security.PUBLIC_PREFIXES)
_DOCS_FILES = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css"}


def _service(request: Request) -> Service:
    """The app's service (``create_app`` puts it on ``app.state``)."""
    svc: Service = request.app.state.service
    return svc


async def page() -> HTMLResponse:
    """The search page."""
    html = resources.files("indexer.server").joinpath("static/index.html").read_text(encoding="utf-8")
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


async def docs() -> HTMLResponse:
    """Swagger UI over /openapi.json, from files in the package (no CDN: works offline)."""
    from fastapi.openapi.docs import get_swagger_ui_html

    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="indexer: API",
        swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
        swagger_favicon_url="data:,",
    )


async def docs_asset(name: str) -> Response:
    media = _DOCS_FILES.get(name)
    if media is None:
        raise NotFoundError(f"no such file {name[:100]!r} of the API docs page")
    data = resources.files("fastapi_offline").joinpath("static", name).read_bytes()
    return Response(data, media_type=media, headers={"Cache-Control": "public, max-age=86400"})


async def healthz() -> dict[str, str]:
    """The process answers (says nothing of models or stores: see /readyz)."""
    return {"status": "ok"}


async def readyz(request: Request) -> dict[str, str]:
    """200 when the models are loaded and every open store answers; 503 otherwise."""
    try:
        await _service(request).check_ready()
    except Overloaded:
        raise
    except IndexerError as exc:
        raise _NotReady(str(exc)) from exc
    return {"status": "ready"}


async def search(body: schemas.SearchBody, request: Request) -> dict[str, Any]:
    """Search a collection: embed the query, fetch candidates (filters applied), rerank, top k."""
    result = await _service(request).search(body.collection, search_request(body))
    return result_json(result, body.collection)


async def collections(request: Request) -> list[dict[str, Any]]:
    """Collections in this data directory."""
    return await _service(request).collections()


async def status(
    request: Request,
    collection: str | None = Query(None, max_length=200, pattern=COLLECTION_PATTERN),
) -> dict[str, Any]:
    """Collections (counts, store, model, roots, freshness) and the server (queue, last errors)."""
    return await _service(request).status(collection)


async def fields(
    request: Request,
    collection: str = Query("default", max_length=200, pattern=COLLECTION_PATTERN),
) -> dict[str, Any]:
    """The fields a search can filter on (`where`), with kinds, counts and example values."""
    return await _service(request).fields(collection)


async def metrics(request: Request) -> Response:
    """Prometheus text format."""
    svc = _service(request)
    try:
        await svc.status()  # refreshes the index-size gauges
    except (Overloaded, IndexerError) as exc:
        logger.debug("metrics: index sizes not refreshed: %s", exc)
    return Response(svc.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)


async def file_text(
    request: Request,
    path: str = Query(..., max_length=4096, description="absolute path of an indexed file"),
    collection: str = Query("default", max_length=200, pattern=COLLECTION_PATTERN),
    query: str | None = Query(None, max_length=MAX_QUERY_CHARS, description="mark the words matching this query"),
    start: int = Query(1, ge=1, alias="from", description="first line to mark"),
    end: int | None = Query(None, ge=1, alias="to", description="last line to mark (default: the end)"),
) -> dict[str, Any]:
    """The text of an indexed file (only files the collection indexed, inside its roots); with `query`, `marks`:
    the [start, end) offsets in the text of the words matching it on lines `from`..`to` (as a hit's snippet)."""
    return await _service(request).file_text(collection, path, query, (start, end))


async def overview(
    request: Request,
    collection: str = Query("default", max_length=200, pattern=COLLECTION_PATTERN),
) -> dict[str, Any]:
    """A collection at a glance for a person: files, chunks, roots, last commit, models by name, the watcher,
    example queries (the search page's empty view). /status stays the machine contract."""
    return await _service(request).overview(collection)


async def thumbnail(
    request: Request,
    path: str = Query(..., max_length=4096, description="absolute path of an indexed image"),
    collection: str = Query("default", max_length=200, pattern=COLLECTION_PATTERN),
    size: int = Query(256, ge=16, le=512, description="longest side in pixels"),
) -> Response:
    """A JPEG thumbnail of an indexed image (only images the collection indexed, inside its roots; made once,
    then cached)."""
    data = await _service(request).thumbnail(collection, path, size)
    return Response(data, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=300"})


async def sync(name: str, request: Request) -> dict[str, Any]:
    """Re-sync every root of a collection (admin scope); searches keep being answered meanwhile."""
    if not valid_collection_name(name):
        raise InputError(f"{name[:200]!r} is not a collection name: {COLLECTION_NAME_RULE}")
    report = await _service(request).sync(name)
    return {"collection": name, "report": report.to_dict()}


def _add_routes(router: APIRouter) -> None:
    """Our routes, each a named function of this module."""
    router.add_api_route("/", page, methods=["GET"], response_class=HTMLResponse, include_in_schema=False)
    router.add_api_route("/docs", docs, methods=["GET"], include_in_schema=False)
    router.add_api_route(DOCS_ASSETS + "/{name}", docs_asset, methods=["GET"], include_in_schema=False)
    router.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"])
    router.add_api_route("/readyz", readyz, methods=["GET"], tags=["health"])
    router.add_api_route("/search", search, methods=["POST"], response_model=schemas.SearchOut, tags=["search"])
    router.add_api_route("/collections", collections, methods=["GET"], tags=["status"])
    router.add_api_route("/status", status, methods=["GET"], tags=["status"])
    router.add_api_route("/fields", fields, methods=["GET"], tags=["search"])
    router.add_api_route("/metrics", metrics, methods=["GET"], tags=["status"], response_class=Response)
    router.add_api_route("/files", file_text, methods=["GET"], tags=["search"])
    router.add_api_route("/overview", overview, methods=["GET"], tags=["status"])
    router.add_api_route("/thumbnail", thumbnail, methods=["GET"], tags=["search"], response_class=Response)
    router.add_api_route(
        "/collections/{name}/sync", sync, methods=["POST"], response_model=schemas.SyncOut, tags=["admin"]
    )


class _NotReady(Exception):
    pass


# -- errors and timing -------------------------------------------------------------------------------------------
def error_response(status: int, message: str, kind: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI, svc: Service) -> None:
    def count(kind: str) -> None:
        svc.metrics.errors.labels(type=kind).inc()

    @app.exception_handler(Overloaded)
    async def overloaded(request: Request, exc: Overloaded) -> JSONResponse:
        count("overloaded")
        svc.metrics.rejected.inc()
        return error_response(503, str(exc), "overloaded_error", {"Retry-After": str(exc.retry_after)})

    @app.exception_handler(_NotReady)
    async def not_ready(request: Request, exc: _NotReady) -> JSONResponse:
        count("not_ready")
        return error_response(503, str(exc), "not_ready", {"Retry-After": "5"})

    @app.exception_handler(IndexerError)
    async def indexer_error(request: Request, exc: IndexerError) -> JSONResponse:
        status, kind = _status_of(exc)
        count(kind)
        if status >= 500:
            svc.record_error(request.url.path, exc)
            logger.error("%s %s: %s", request.method, request.url.path, exc)
        retry = status == 503 or kind == "locked_error"
        return error_response(status, str(exc), kind, {"Retry-After": "5"} if retry else None)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        count("invalid_request_error")
        content_type = request.headers.get("content-type", "")
        if request.method in ("POST", "PUT", "PATCH") and "json" not in content_type.lower():
            # e.g. `curl -d '{...}'`, which sends application/x-www-form-urlencoded: say so (never parsed as JSON,
            # so a cross-site form cannot post to the API)
            return error_response(
                415,
                f"the body must be JSON sent with 'Content-Type: application/json' (this request says "
                f"{content_type[:100] or 'nothing'!r}); with curl add -H 'content-type: application/json'",
                "invalid_request_error",
            )
        return error_response(422, _validation_message(exc), "invalid_request_error")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        count("http_error")
        return error_response(exc.status_code, str(exc.detail), "invalid_request_error", exc.headers)

    @app.exception_handler(RecursionError)
    async def too_deep(request: Request, exc: RecursionError) -> JSONResponse:
        count("invalid_request_error")  # only input nests deep enough for this: the client's to fix
        return error_response(400, "the request is nested too deeply; send a flatter body", "invalid_request_error")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        count("internal_error")
        svc.record_error(request.url.path, exc)
        logger.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, "internal error; the server log has the details", "internal_error")


def _status_of(exc: IndexerError) -> tuple[int, str]:
    if isinstance(exc, NotFoundError):
        return 404, "not_found_error"
    if isinstance(exc, InputError):
        return 400, "invalid_request_error"
    if isinstance(exc, CollectionMismatchError):
        return 409, "conflict_error"
    if isinstance(exc, StoreUnavailableError):
        return 503, "store_unavailable"
    if isinstance(exc, LockedError) or "being written by another" in str(exc):
        return 409, "locked_error"
    return 500, "server_error"


def _validation_message(exc: RequestValidationError) -> str:
    return schemas.plain_validation_message(list(exc.errors()))


class CallerMiddleware:
    """Marks each request with its caller (:mod:`indexer.core.caller`), for a store's stable view per caller
    (``qdrant_route_affinity = caller``): the caller's own ``X-Qdrant-Route-Affinity`` header when it sends one
    (a caller behind a load balancer should), else its address."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = (dict(scope.get("headers") or []).get(AFFINITY_HEADER) or b"").decode("latin-1")[:256]
        client = scope.get("client")
        plain = sent.isascii() and sent.isprintable() and sent.strip()  # else not a value to pass on: the address
        who = sent if plain else (str(client[0]) if client else None)
        with caller.calling(who):
            await self.app(scope, receive, send)


class TimingMiddleware:
    """Request latency histogram by route template (not raw path: bounded label values)."""

    def __init__(self, app: Any, svc: Service) -> None:
        self.app = app
        self.svc = svc

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_status(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            path = scope.get("path", "")
            label = getattr(route, "path", None) or ("/mcp" if path.startswith("/mcp") else "other")
            self.svc.metrics.requests.labels(
                method=scope.get("method", ""), route=label, status=str(status[0])
            ).observe(time.perf_counter() - started)
