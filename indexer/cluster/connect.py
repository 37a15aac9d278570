"""Joining a Ray cluster, safely: token authentication required, no dashboard, errors translated.

An exposed Ray head runs anyone's code, and Ray leaves token authentication off for clusters made by ``ray
start`` unless ``RAY_AUTH_MODE=token`` is set. So the writer joins only with token authentication: it sets
``RAY_AUTH_MODE=token`` for itself (the token comes from ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token``, Ray's own precedence) and refuses a ``RAY_AUTH_MODE`` that says otherwise. A cluster
started without the token then refuses the writer, and so does a cluster whose token differs.

Addresses: ``auto`` joins the cluster ``ray start`` made on this machine; ``HOST:PORT`` a head's GCS address;
``local`` starts a one-machine cluster inside this process (for trying it; ``ray.init``'s own token is made).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

from indexer.errors import ClusterError, ConfigError

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'llama-indexer[cluster]' (Ray 2.60+)"
DEPLOY_HINT = "docs/deploy.md#indexing-on-a-ray-cluster"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
CONNECT_TIMEOUT = 5.0  # seconds for the head's port to answer
_lock = threading.Lock()


def require_ray() -> Any:
    """The ``ray`` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"indexing on a cluster needs Ray, which is not installed: {INSTALL_HINT}") from exc
    return ray


def require_token_auth() -> None:
    """Token authentication on for this process (see the module docstring); a ClusterError if turned off."""
    mode = os.environ.get("RAY_AUTH_MODE", "").strip().lower()
    if mode and mode != "token":
        raise ClusterError(
            f"RAY_AUTH_MODE={mode!r}: indexer joins Ray clusters only with token authentication (an open Ray head "
            f"runs anyone's code); unset it or set RAY_AUTH_MODE=token, and start the cluster with it ({DEPLOY_HINT})"
        )
    os.environ["RAY_AUTH_MODE"] = "token"


def connect(address: str) -> Any:
    """Join the cluster at ``address`` once per process; returns the ``ray`` module."""
    require_token_auth()  # before Ray is imported: it reads RAY_AUTH_MODE once, at import
    _reachable(address)
    if address.rsplit(":", 1)[0] in LOOPBACK:
        # Ray replaces a loopback head address with this machine's network address, where a head bound to loopback
        # does not answer; with this (read at import) it keeps loopback. It only changes how Ray picks this node's IP
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = require_ray()
    with _lock:
        if ray.is_initialized():
            return ray
        options: dict[str, Any] = {"namespace": "indexer", "log_to_driver": False, "logging_level": logging.WARNING}
        try:
            if address == "local":
                ray.init(include_dashboard=False, **options)
            else:
                ray.init(address=address, **options)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError... : all mean "not joined"
            if ray.is_initialized():
                ray.shutdown()
            raise ClusterError(
                f"cannot join the Ray cluster at {address!r}: {' '.join(str(exc).split())[:400]}; start it with "
                f"`RAY_AUTH_MODE=token ray start --head` and the same token here ({DEPLOY_HINT}), or index without "
                "--cluster"
            ) from exc
    logger.info("joined the Ray cluster at %s: %s", address, describe(ray))
    return ray


def _reachable(address: str) -> None:
    """A HOST:PORT head answers on its port (Ray itself retries an unreachable head for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # auto, local: Ray resolves them and fails at once when there is nothing
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise ClusterError(
            f"cannot join the Ray cluster at {address!r}: nothing answers there ({exc}); start it with "
            f"`RAY_AUTH_MODE=token ray start --head` ({DEPLOY_HINT}), check the address, or index without --cluster"
        ) from exc


def describe(ray: Any) -> str:
    """Nodes and CPUs of the joined cluster, for a person."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = sum(int(n.get("Resources", {}).get("CPU", 0)) for n in nodes)
    return f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}, {cpus} CPUs"


def disconnect() -> None:
    """Leave the cluster (tests; a process that joined stays joined until it ends otherwise)."""
    try:
        import ray
    except ImportError:
        return
    with _lock:
        if ray.is_initialized():
            ray.shutdown()
