"""Run the app under uvicorn on a socket bound here (so the port is known before serving), announce it in the
data directory, and remove the announcement on exit."""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
from typing import Any

import uvicorn

from indexer.errors import ConfigError
from indexer.server import announce
from indexer.settings import Settings

logger = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says TCP, and
    # accepted sockets inherit it. Without it, a response written in two parts (uvicorn: headers, then body) waits
    # for the client's delayed ACK on a kept-alive connection: +40 ms per request (bench/api_latency.py).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}; pick another --port") from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def client_url(host: str, port: int) -> str:
    """The address a local client uses: a wildcard bind is reached over loopback."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "[::1]"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def serve(settings: Settings, *, watch: bool = True, allow_public: bool = False, log_level: str = "warning") -> None:
    from indexer.server.app import create_app

    watch = watch and not settings.stateless  # a stateless search worker never writes: the writer watches
    host, port = settings.server_host, settings.server_port
    if not is_loopback(host) and not (settings.api_keys or settings.admin_api_keys) and not allow_public:
        raise ConfigError(
            f"refusing to serve {host} (reachable from other machines) without API keys: set api_keys / "
            "admin_api_keys (INDEXER_API_KEYS='[\"...\"]'), or pass --public to serve without keys"
        )
    existing = announce.read(settings.data_dir)
    if existing is not None and _answers(existing.url):
        raise ConfigError(
            f"a server (pid {existing.pid}) already serves {settings.data_dir} at {existing.url}; stop it first"
        )
    sock = bind(host, port)
    port = sock.getsockname()[1]
    url = client_url(host, port)
    ann = announce.Announcement.new(url, settings.data_dir)
    app = create_app(settings, extra_admin_keys=(ann.token,), watch=watch)
    config = uvicorn.Config(
        app, log_level=log_level, access_log=False, lifespan="on", timeout_graceful_shutdown=10, server_header=False
    )
    server = _AnnouncingServer(config, settings, ann)
    print(f"indexer: serving {url} (data dir {settings.data_dir}); Ctrl-C stops", file=sys.stderr, flush=True)
    if not is_loopback(host) and not settings.allowed_hosts:
        print(
            "indexer: answering only requests for localhost, 127.0.0.1 and ::1" + ("" if host in ("0.0.0.0", "::", "")
            else f" and {host}") + "; list the names clients use in allowed_hosts (INDEXER_ALLOWED_HOSTS, see "
            "docs/deploy.md)",
            file=sys.stderr,
            flush=True,
        )
    try:
        server.run(sockets=[sock])
    finally:
        announce.remove(settings.data_dir, ann)
        sock.close()


def _answers(url: str) -> bool:
    import http.client
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    try:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=2)
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


class _AnnouncingServer(uvicorn.Server):
    """uvicorn.Server that writes the announcement once it serves, and removes it when it stops."""

    def __init__(self, config: Any, settings: Settings, ann: announce.Announcement) -> None:
        super().__init__(config)
        self._settings = settings
        self._ann = ann

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self._settings.stateless:  # a worker writes nothing in its data directory
            announce.write(self._settings.data_dir, self._ann)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        announce.remove(self._settings.data_dir, self._ann)
        await super().shutdown(sockets=sockets)
