"""/v1/embeddings with the official openai client, /v1/rerank with the cohere client, against the real server."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from tests.server.conftest import ServerHandle

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def direct_embedder(embed_model_path):
    from indexer.engine.llama_embedding import LlamaEmbedding

    emb = LlamaEmbedding(str(embed_model_path), verbose=False, n_threads=2)
    yield emb
    emb.close()


def test_openai_client_embeds_strings_lists_and_tokens(served: ServerHandle, direct_embedder) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
    model = served.settings.embed_model

    one = client.embeddings.create(model=model, input="how do I rotate keys?")  # the client asks for base64
    many = client.embeddings.create(model=model, input=["first text", "second text"], encoding_format="float")
    tokens = direct_embedder.tokenize(b"first text")
    by_ids = client.embeddings.create(model=model, input=[tokens], encoding_format="float")

    assert len(one.data) == 1 and len(one.data[0].embedding) == 384
    assert one.usage.prompt_tokens > 0 and one.usage.total_tokens == one.usage.prompt_tokens
    assert [d.index for d in many.data] == [0, 1]
    reference = np.asarray(direct_embedder.embed(["first text", "second text"]))
    got = np.asarray([d.embedding for d in many.data])
    assert np.allclose(got, reference, atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    assert np.allclose(by_ids.data[0].embedding, reference[0], atol=1e-5)
    assert by_ids.usage.prompt_tokens == len(tokens)
    direct_one = np.asarray(direct_embedder.embed("how do I rotate keys?"))
    assert np.allclose(one.data[0].embedding, direct_one, atol=1e-5)


def test_openai_client_errors_are_clear(served: ServerHandle) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
    model = served.settings.embed_model
    with pytest.raises(openai.BadRequestError, match="dimensions=64 is not supported"):
        client.embeddings.create(model=model, input="x", dimensions=64)
    with pytest.raises(openai.NotFoundError, match="is not served here"):
        client.embeddings.create(model="text-embedding-3-small", input="x")
    with pytest.raises(openai.BadRequestError, match="token ids"):
        client.embeddings.create(model=model, input=[[10**9]], encoding_format="float")
    with pytest.raises(openai.BadRequestError, match="tokens; the model takes at most"):
        client.embeddings.create(model=model, input="word " * 2000, encoding_format="float")
    ok = client.embeddings.create(model=model, input="x", dimensions=384)
    assert len(ok.data[0].embedding) == 384


def test_embeddings_raw_shapes_and_caps(served: ServerHandle) -> None:
    with served.client() as c:
        b64 = c.post("/v1/embeddings", json={"input": "hello", "encoding_format": "base64"}).json()
        flat = c.post("/v1/embeddings", json={"input": "hello"}).json()
        too_many = c.post("/v1/embeddings", json={"input": ["x"] * (served.settings.max_inputs + 1)})
        empty = c.post("/v1/embeddings", json={"input": []})
        models = c.get("/v1/models").json()
    vec = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(vec, flat["data"][0]["embedding"], atol=1e-6)
    assert b64["object"] == "list" and b64["data"][0]["object"] == "embedding"
    assert too_many.status_code == 400 and "max_inputs" in too_many.json()["error"]["message"]
    assert empty.status_code == 400
    kinds = {m["kind"]: m["id"] for m in models["data"]}
    assert kinds["embedding"] == served.settings.embed_model
    assert kinds["rerank"] == Path(str(served.settings.rerank_model)).stem


def test_cohere_client_reranks(served: ServerHandle) -> None:
    cohere = pytest.importorskip("cohere")
    client = cohere.ClientV2(api_key="unused", base_url=served.url)
    docs = [
        "Pasta recipe: boil salted water and cook the spaghetti.",
        "To rotate the API keys, run vault rotate every 90 days.",
        "The garden tomatoes need watering twice a week.",
    ]
    name = Path(str(served.settings.rerank_model)).stem
    resp = client.rerank(model=name, query="how do I rotate api keys", documents=docs, top_n=2)
    assert [r.index for r in resp.results][0] == 1
    assert len(resp.results) == 2
    assert resp.results[0].relevance_score >= resp.results[1].relevance_score


def test_rerank_published_shapes(served: ServerHandle, reranker_model_path) -> None:
    from indexer.engine.adapters import LlamaReranker

    docs = ["the cat sat on the mat", {"text": "rotate the API keys every 90 days", "id": "k1"}, "tomato sauce"]
    with served.client() as c:
        r = c.post("/v1/rerank", json={"query": "rotate keys", "documents": docs, "return_documents": True})
        bad = c.post("/v1/rerank", json={"query": "q", "documents": []})
        wrong_model = c.post("/v1/rerank", json={"query": "q", "documents": ["a"], "model": "bge-reranker"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["results"][0]["index"] == 1
    assert body["results"][0]["document"] == {"text": "rotate the API keys every 90 days", "id": "k1"}
    assert body["results"][1]["document"]["text"] in ("the cat sat on the mat", "tomato sauce")
    scores = [x["relevance_score"] for x in body["results"]]
    assert scores == sorted(scores, reverse=True)
    assert body["usage"]["total_tokens"] > 0
    rr = LlamaReranker(str(reranker_model_path), max_tokens=served.settings.rerank_max_tokens, n_threads=2)
    try:
        direct = rr.rerank(
            "rotate keys", ["the cat sat on the mat", "rotate the API keys every 90 days", "tomato sauce"]
        )
    finally:
        rr.close()
    by_index = {x["index"]: x["relevance_score"] for x in body["results"]}
    assert np.allclose([by_index[i] for i in range(3)], direct, atol=1e-4)
    assert bad.status_code == 400
    assert wrong_model.status_code == 404 and "not served here" in wrong_model.json()["error"]["message"]


def test_concurrent_embedding_requests_share_one_engine_call(served: ServerHandle, direct_embedder) -> None:
    """Requests waiting for the model together are embedded in one call; each gets its own vectors, and a bad
    request among them fails alone."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tests.server.conftest import wait_for

    svc = served.service
    release, running = threading.Event(), threading.Event()

    def hold() -> None:
        running.set()
        release.wait(120)

    texts = ["alpha particles", "beta decay", "gamma rays"]
    pool = ThreadPoolExecutor(max_workers=5)
    try:
        blocker = pool.submit(svc.worker.call_sync, hold, 120)
        assert running.wait(30)
        flushes = svc.embed_flushes
        with served.client() as c:
            good = [pool.submit(c.post, "/v1/embeddings", json={"input": t}) for t in texts]
            bad = pool.submit(c.post, "/v1/embeddings", json={"input": [[10**9]]})
            wait_for(lambda: len(svc._embed_pending) == 4, what="four waiting requests")
            release.set()
            answers = [f.result(timeout=60) for f in good]
            refused = bad.result(timeout=60)
        blocker.result(timeout=60)
    finally:
        release.set()
        pool.shutdown(wait=True)
    assert svc.embed_flushes == flushes + 1
    assert refused.status_code == 400 and "token id" in refused.json()["error"]["message"]
    reference = np.asarray(direct_embedder.embed(texts))
    for answer, ref in zip(answers, reference, strict=True):
        assert answer.status_code == 200, answer.text
        assert np.allclose(answer.json()["data"][0]["embedding"], ref, atol=1e-5)


def test_model_aliases_name_the_served_model_only(isolated_env, embed_model_path) -> None:
    """'default' (and 'indexer') name the served model out of the box; embed_model_aliases adds the names a
    client sends by default; any other name stays 404, saying how to fix it."""
    openai = pytest.importorskip("openai")
    from tests.server.conftest import make_settings, start_server

    settings = make_settings(isolated_env / "alias-data", embed_model_path, None,
                             embed_model_aliases=("default", "text-embedding-3-small"))
    handle = start_server(settings, isolated_env, mcp=False)
    try:
        client = openai.OpenAI(base_url=handle.url + "/v1", api_key="unused", max_retries=0)
        named = client.embeddings.create(model=settings.embed_model, input="glaciers", encoding_format="float")
        for alias in ("default", "text-embedding-3-small"):
            got = client.embeddings.create(model=alias, input="glaciers", encoding_format="float")
            assert got.data[0].embedding == pytest.approx(named.data[0].embedding, abs=1e-6)
        with pytest.raises(openai.NotFoundError) as exc:
            client.embeddings.create(model="text-embedding-ada-002", input="x")
        assert "embed_model_aliases" in str(exc.value) and "'text-embedding-3-small'" in str(exc.value)
    finally:
        handle.stop()


def test_default_names_the_served_model_out_of_the_box(served: ServerHandle) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
    assert len(client.embeddings.create(model="default", input="x", encoding_format="float").data[0].embedding) == 384
