"""API keys with read and admin scopes, and the request body cap, as plain ASGI middleware.

Middleware rather than route dependencies so that mounted apps (the MCP transport) are covered too.

* Keys come in ``Authorization: Bearer KEY``, ``X-API-Key: KEY`` or ``api-key: KEY`` (what Qdrant clients
  send). When no key is configured (the loopback default) every request is allowed. Public paths (health, the
  page's static files, the schema) need no key.
* Admin paths (``POST /collections/{name}/sync``) need an admin key; everything else a read or admin key.
* Bodies larger than ``max_body_bytes`` are refused with 413, by ``Content-Length`` or while streaming.
* Every request, on every route, with or without keys, names an allowed host (``allowed_hosts``; the loopback
  names by default) in its ``Host`` header, or in ``X-Forwarded-Host`` when ``trust_forwarded_host`` is set;
  anything else is 421. Without it a web page could read the API through DNS rebinding (its own name resolving
  to 127.0.0.1: the browser then sends ``Host: evil.example``).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PATHS = frozenset({"/", "/healthz", "/readyz", "/openapi.json", "/docs", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)


def is_admin_path(method: str, path: str) -> bool:
    return method == "POST" and path.startswith("/collections/") and path.endswith("/sync")


async def send_error(send: Send, status: int, message: str, kind: str, headers: Iterable[tuple[str, str]] = ()) -> None:
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class KeyRing:
    """Configured keys; ``extra_admin`` (the token announced to the local CLI) is accepted as an admin key but
    does not by itself turn authentication on: with no configured key the loopback server stays open."""

    def __init__(self, read: Iterable[str], admin: Iterable[str], extra_admin: Iterable[str] = ()) -> None:
        self.read = tuple(k for k in read if k)
        configured = tuple(k for k in admin if k)
        self.enabled = bool(self.read or configured)
        self.admin = configured + tuple(k for k in extra_admin if k)

    def scope_of(self, key: str) -> str | None:
        """ "admin", "read" or None; constant-time comparisons."""
        admin = any(hmac.compare_digest(key.encode(), k.encode()) for k in self.admin)
        read = any(hmac.compare_digest(key.encode(), k.encode()) for k in self.read)
        return "admin" if admin else "read" if read else None


def key_from_headers(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name == b"authorization":
            text = value.decode("latin-1").strip()
            if text[:7].lower() == "bearer ":
                return text[7:].strip()
        elif name in (b"x-api-key", b"api-key"):  # api-key: what Qdrant clients send (/collections/*/points/query)
            return value.decode("latin-1").strip()
    return None


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARD_BINDS = ("", "0.0.0.0", "::", "[::]")


def default_allowed_hosts(server_host: str) -> tuple[str, ...]:
    """The loopback names, and the address the server binds when it is a named one (not a wildcard)."""
    host = server_host.strip().strip("[]").lower()
    return LOOPBACK_NAMES + (() if host in _WILDCARD_BINDS or host in LOOPBACK_NAMES else (host,))


def host_name(value: str) -> str:
    """The name of a Host header value: lower case, without port or IPv6 brackets (``[::1]:8480`` -> ``::1``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class HostPolicy:
    """Which Host names are answered. Entries: exact names, ``*.example.com`` (the domain's subdomains) or ``*``."""

    def __init__(self, allowed: Iterable[str], trust_forwarded: bool = False) -> None:
        names = [host_name(a) if a.strip() != "*" else "*" for a in allowed if a.strip()]
        self.any = "*" in names
        self.exact = frozenset(n for n in names if not n.startswith("*."))
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))
        self.trust_forwarded = trust_forwarded
        self.listed = ", ".join(a for a in allowed if a.strip())

    def allows(self, name: str) -> bool:
        return self.any or name in self.exact or (bool(name) and name.endswith(self.suffixes))

    def host_of(self, headers: Iterable[tuple[bytes, bytes]]) -> str:
        host = forwarded = ""
        for key, value in headers:
            if key == b"host" and not host:
                host = value.decode("latin-1")
            elif key == b"x-forwarded-host" and not forwarded:
                forwarded = value.decode("latin-1").split(",")[0]  # the first proxy's: what the client asked for
        return forwarded if self.trust_forwarded and forwarded else host


class HostMiddleware:
    """421 for a request whose host is not allowed (every route, before keys are looked at)."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.policy.any:
            await self.app(scope, receive, send)
            return
        raw = self.policy.host_of(scope.get("headers", []))
        if not self.policy.allows(host_name(raw)):
            where = "X-Forwarded-Host" if self.policy.trust_forwarded else "Host"
            await send_error(
                send,
                421,
                f"this server does not answer to host {raw[:100]!r} ({where} header); it answers to "
                f"{self.policy.listed}. Add the name you use to allowed_hosts (INDEXER_ALLOWED_HOSTS)",
                "misdirected_request",
            )
            return
        await self.app(scope, receive, send)


class AuthMiddleware:
    def __init__(self, app: ASGIApp, keys: KeyRing) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys.enabled or scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            await self.app(scope, receive, send)
            return
        key = key_from_headers(scope.get("headers", []))
        if not key:
            await send_error(
                send,
                401,
                "an API key is required: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                "authentication_error",
                [("www-authenticate", "Bearer")],
            )
            return
        granted = self.keys.scope_of(key)
        if granted is None:
            await send_error(
                send, 401, "the API key is not valid", "authentication_error", [("www-authenticate", "Bearer")]
            )
            return
        if is_admin_path(scope.get("method", ""), path) and granted != "admin":
            await send_error(send, 403, "this operation needs an admin API key (admin_api_keys)", "permission_error")
            return
        scope.setdefault("state", {})["scope"] = granted
        await self.app(scope, receive, send)


IMAGE_PATHS = frozenset({"/search", "/v1/embeddings", "/mcp"})  # routes that take an image as a data URI
_IMAGE_MARK = b"data:image/"


class BodyLimitMiddleware:
    """413 for a body over ``max_bytes`` (``max_body_bytes``), by Content-Length or while streaming. On the routes
    that take images (:data:`IMAGE_PATHS`) a body carrying a ``data:image/`` URI may reach ``image_bytes``
    (``max_image_body_bytes``): a body past ``max_bytes`` with no image in it is still refused."""

    def __init__(self, app: ASGIApp, max_bytes: int, image_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.image_bytes = max(max_bytes, image_bytes or max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.image_bytes if scope.get("path", "") in IMAGE_PATHS else self.max_bytes
        message = (
            f"the request body is larger than {self.max_bytes} bytes (max_body_bytes); send fewer or shorter inputs"
        )
        image_message = (
            f"the request body is larger than {cap} bytes (max_image_body_bytes, a request with an image); send a "
            "smaller image (the CLI and the Python client downscale it to 1024 pixels a side)"
        )
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > cap:
                    await send_error(send, 413, message if cap == self.max_bytes else image_message,
                                     "invalid_request_error")
                    return
        received = 0
        started = False
        refused = False
        image_seen = False
        tail = b""

        async def limited_receive() -> Message:
            # Past the cap: answer 413 here, then tell the app the client left (its answer is dropped).
            nonlocal received, refused, image_seen, tail
            if refused:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                body = msg.get("body", b"")
                received += len(body)
                if cap > self.max_bytes and not image_seen:
                    image_seen = _IMAGE_MARK in tail + body[: len(_IMAGE_MARK)] or _IMAGE_MARK in body
                    tail = body[-len(_IMAGE_MARK) :]
                over = received > cap or (received > self.max_bytes and not image_seen)
                if over:
                    refused = True
                    if not started:
                        text = image_message if received > cap else message
                        await send_error(send, 413, text, "invalid_request_error")
                    return {"type": "http.disconnect"}
            return msg

        async def tracking_send(msg: Message) -> None:
            nonlocal started
            if refused:
                return
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except Exception:
            if not refused:
                raise
