"""A real uvicorn server on loopback (random port) over a small indexed corpus, with the real models.

``ServerHandle`` runs ``uvicorn.Server`` in a thread on a socket bound to 127.0.0.1:0, waits (with a deadline)
until it serves, and stops it at teardown. The service object is reachable (``handle.service``) so tests can
occupy the model worker or the index thread deterministically.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

CORPUS = {
    "docs/keys.md": (
        "# Operations\n\n## Key rotation\n\nTo rotate the API keys, run `vault rotate` every 90 days and restart the "
        "gateway so it reads the new signing key.\n"
    ),
    "docs/backup.md": (
        "# Backup policy\n\nNightly backups of the database are written to the NAS and kept for thirty days. "
        "Restores are tested every month.\n"
    ),
    "notes/pasta.txt": "Pasta recipe: boil salted water, cook the spaghetti for nine minutes, add tomato sauce.\n",
    "notes/garden.txt": "The tomatoes in the garden need watering twice a week in summer; prune the basil.\n",
    "src/geometry.py": (
        'def circle_area(radius: float) -> float:\n    """Area of a circle from its radius."""\n'
        "    return 3.14159 * radius * radius\n"
    ),
}


def write_corpus(root: Path) -> Path:
    for rel, text in CORPUS.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


@dataclass
class ServerHandle:
    url: str
    app: Any
    server: Any
    thread: threading.Thread
    settings: Any
    root: Path

    @property
    def service(self) -> Any:
        return self.app.state.service

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60, **kwargs)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)


def start_server(settings: Any, root: Path, **app_kwargs: Any) -> ServerHandle:
    import uvicorn

    from indexer.server.app import create_app
    from indexer.server.run import bind

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = create_app(settings, **app_kwargs)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 180
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server thread ended before serving")
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not start within 180 s")
        time.sleep(0.02)
    return ServerHandle(f"http://127.0.0.1:{port}", app, server, thread, settings, root)


def make_settings(data_dir: Path, embed_model: Path, reranker: Path | None, **extra: Any) -> Any:
    from indexer.settings import Settings

    return Settings(
        data_dir=data_dir,
        embed_model=str(embed_model),
        rerank_model=str(reranker) if reranker else None,
        threads=2,
        **extra,
    )


def index_corpus(settings: Any, root: Path, collection: str = "default") -> None:
    from indexer.collection.facade import open_collection

    with open_collection(collection, settings=settings) as col:
        report = col.index([root])
    assert report.files_indexed == len(CORPUS), report.to_dict()


@pytest.fixture(scope="module")
def isolated_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Module-scoped: no user config file is read while module fixtures build settings."""
    base = tmp_path_factory.mktemp("server-env")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INDEXER_CONFIG", str(base / "no-config.toml"))
        mp.setenv("INDEXER_DATA_DIR", str(base / "unused-data"))
        yield base


@pytest.fixture(scope="module")
def served(isolated_env: Path, embed_model_path: Path, reranker_model_path: Path) -> Iterator[ServerHandle]:
    """The main test server: corpus indexed into 'default', reranker configured, no API keys."""
    root = write_corpus(isolated_env / "corpus").resolve()
    settings = make_settings(isolated_env / "data", embed_model_path, reranker_model_path)
    index_corpus(settings, root)
    handle = start_server(settings, root)
    yield handle
    handle.stop()


def wait_for(predicate: Any, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


ATTACHED = "theirs"  # the Qdrant collection of ``attached_served`` (attachment ``qdrant.theirs``)


@pytest.fixture(scope="module")
def attached_served(isolated_env: Path, embed_model_path: Path, reranker_model_path: Path) -> Iterator[ServerHandle]:
    """A server over our corpus in 'default' and an attachment ``qdrant.theirs`` to a foreign collection in an
    embedded Qdrant folder (several named vectors; ours fits 'mini'), so the Qdrant-shaped routes have a
    collection to answer for. The full service: the plugin's router comes in through its entry point."""
    from indexer.engine.adapters import LlamaEmbedder
    from plugins.qdrant_attach import attach
    from tests.integration.corpus import write_corpus as write_their_corpus
    from tests.integration.test_qdrant_attach import Loc, make_plain_named

    root = write_corpus(isolated_env / "attached-corpus").resolve()
    settings = make_settings(isolated_env / "attached-data", embed_model_path, reranker_model_path)
    index_corpus(settings, root)
    folder = isolated_env / "attached-qdrant"
    emb = LlamaEmbedder(embed_model_path)
    try:
        make_plain_named(Loc(None, folder), ATTACHED, emb)
        with attach(ATTACHED, path=folder, embedder=emb, settings=settings) as col:
            col.index([write_their_corpus(isolated_env / "attached-theirs")])
    finally:
        emb.close()
    handle = start_server(settings, root)
    yield handle
    handle.stop()
