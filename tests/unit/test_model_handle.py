"""The collection's one model handle (indexer/collection/model.py): lazy load, prompts, record answers, the lock.

A fake engine stands in for the llama.cpp adapter: these are unit tests of our own logic (the real model runs
through the handle in every integration test)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from indexer.collection.model import ModelHandle, RerankerHandle
from indexer.types import Normalization


class _Engine:
    model_id = "m-1"
    dimensions = 2
    similarity = "cosine"
    max_tokens = 8
    media_kinds = ()
    model_path = "/models/m.gguf"
    vocab_size = 100

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.closed = False
        self.inside = 0
        self.overlaps = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def embed_batch(self, texts: Sequence[str], normalize: object) -> np.ndarray:
        self.inside += 1
        if self.inside > 1:
            self.overlaps += 1
        time.sleep(0.005)
        self.seen.extend(texts)
        self.inside -= 1
        return np.zeros((len(texts), 2), dtype=np.float32)

    def embed_images(self, images: Sequence[bytes], normalize: object) -> np.ndarray:
        self.seen.extend(images)
        return np.ones((len(images), 2), dtype=np.float32)

    def embed_inputs(self, items: Sequence[Any], normalize: object) -> np.ndarray:
        self.seen.extend(items)
        return np.zeros((len(items), 2), dtype=np.float32)

    def close(self) -> None:
        self.closed = True


@dataclass
class _Record:
    model_id: str = "m-1"
    dimensions: int = 2
    model_path: str = "/models/m.gguf"


def _counting(engine: _Engine) -> tuple[list[int], Any]:
    loads: list[int] = []

    def load() -> _Engine:
        loads.append(1)
        return engine

    return loads, load


def test_a_prompt_view_prefixes_texts_not_images_and_keys_its_cache() -> None:
    engine = _Engine()
    handle = ModelHandle.over(engine)  # type: ignore[arg-type]
    query = handle.with_prompt("query: ")
    assert query.count_tokens("a b") == 3
    query.embed_batch(["a", "b"], Normalization.L2)
    query.embed_images([b"png"], Normalization.L2)
    query.embed_inputs(["c", [1, 2]], Normalization.L2)
    assert engine.seen == ["query: a", "query: b", b"png", "query: c", [1, 2]]
    assert handle.model_id == "m-1"  # no prompt: the model's own id
    assert query.model_id.startswith("m-1+prompt-") and query.model_id != handle.with_prompt("passage: ").model_id


def test_the_engine_loads_once_on_first_use_and_views_share_it() -> None:
    engine = _Engine()
    loads, load = _counting(engine)
    handle = ModelHandle(load)
    docs, queries = handle.with_prompt("passage: "), handle.with_prompt("query: ")
    assert not handle.loaded and loads == []
    docs.embed_batch(["x"], Normalization.L2)
    queries.embed_batch(["y"], Normalization.L2)
    assert loads == [1] and handle.loaded and queries.loaded


def test_a_recorded_model_answers_identity_width_and_media_without_loading() -> None:
    loads, load = _counting(_Engine())
    handle = ModelHandle(load, recorded=lambda: _Record(model_id="rec-id", dimensions=7),  # type: ignore[arg-type,return-value]
                         media=lambda path: path.endswith("m.gguf"))
    assert handle.model_id == "rec-id" and handle.dimensions == 7 and handle.media_kinds == ("image",)
    assert loads == []
    assert handle.similarity == "cosine" and loads == [1]  # what only the model knows loads it
    assert handle.model_id == "m-1" and handle.media_kinds == ()  # loaded: the engine answers


def test_unload_forgets_without_closing_and_close_closes() -> None:
    first, second = _Engine(), _Engine()
    engines = iter([first, second])
    handle = ModelHandle(lambda: next(engines))  # type: ignore[arg-type,return-value]
    handle.embed_batch(["a"], Normalization.L2)
    handle.unload()  # a reindex switched the model: a thread may still embed with the old one
    assert not first.closed and not handle.loaded
    handle.embed_batch(["b"], Normalization.L2)
    assert second.seen == ["b"]
    handle.close()
    assert second.closed and not handle.loaded


def test_calls_from_many_threads_never_overlap_on_one_model() -> None:
    engine = _Engine()
    handle = ModelHandle.over(engine)  # type: ignore[arg-type]
    views = [handle, handle.with_prompt("q: "), handle.with_prompt("p: ")]
    threads = [threading.Thread(target=lambda v=v: [v.embed_batch(["t"], Normalization.L2) for _ in range(5)])
               for v in views * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(engine.seen) == 30 and engine.overlaps == 0


def test_a_loader_error_reaches_the_caller_and_the_next_call_tries_again() -> None:
    calls: list[int] = []

    def load() -> _Engine:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the model file is missing")
        return _Engine()

    handle = ModelHandle(load)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="missing"):
        handle.embed_batch(["a"], Normalization.L2)
    assert not handle.loaded
    handle.embed_batch(["a"], Normalization.L2)
    assert handle.loaded and len(calls) == 2


def test_the_reranker_handle_serializes_and_closes() -> None:
    class _Ranker:
        model_id = "r-1"
        closed = False

        def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            return [float(len(t)) for t in texts]

        def close(self) -> None:
            self.closed = True

    ranker = _Ranker()
    handle = RerankerHandle(ranker)  # type: ignore[arg-type]
    assert handle.model_id == "r-1" and handle.rerank("q", ["a", "bbb"]) == [1.0, 3.0]
    handle.close()
    assert ranker.closed


def test_a_closed_handle_refuses_a_late_call_instead_of_loading_the_model_again() -> None:
    # a read still chunking when the collection closes (Ctrl-C: reads are not waited for) counted its tokens through
    # the handle, which loaded a new engine that nobody closed, during the interpreter's exit
    loads: list[_Engine] = []

    def load() -> _Engine:
        loads.append(_Engine())
        return loads[-1]

    handle = ModelHandle(load)  # type: ignore[arg-type]
    view = handle.with_prompt("query: ")
    assert handle.count_tokens("two words") == 2 and len(loads) == 1
    handle.close()
    assert loads[0].closed
    from indexer.errors import ModelError

    for late in (lambda: handle.count_tokens("a"), lambda: view.embed_batch(["a"], Normalization.L2)):
        with pytest.raises(ModelError, match="closed"):
            late()
    assert len(loads) == 1  # not loaded again
