"""Attach to collections made by LangChain, LlamaIndex, Haystack and plain qdrant-client: inspect, search,
index, delete, and prove that nothing of theirs changed (points, vectors, payloads, config, byte for byte).

The framework layouts are made by the framework packages themselves when they are installed (the
``attach-tests`` extra); without them those cases are skipped. Embedded Qdrant always; a server too when
QDRANT_URL is set.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_client import QdrantClient
from qdrant_client import models as qm

import indexer
from indexer.core.normalization import Normalization
from indexer.errors import CollectionMismatchError, ConfigError, StoreError
from indexer.search.query import fit_query
from plugins.qdrant_attach import attach
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow

FOREIGN = [
    ("Violins are strung with gut or steel strings and played with a bow of horse hair.", "/theirs/violin.md", "music"),
    ("Glaciers carve U-shaped valleys as the ice slowly flows downhill under its own weight.", "/theirs/ice.md", "geo"),
    ("A database index speeds up lookups at the cost of slower writes and extra storage.", "/theirs/db.md", "tech"),
    ("Volcanoes erupt when pressure from molten rock and gas builds up beneath the crust.", "/theirs/lava.md", "geo"),
]
LOCATIONS = ["embedded"] + (["server"] if os.environ.get("QDRANT_URL") else [])


@dataclass
class Loc:
    url: str | None
    path: Path | None

    def client(self) -> QdrantClient:
        if self.url:
            return QdrantClient(url=self.url, api_key=os.environ.get("QDRANT_API_KEY"), check_compatibility=False)
        assert self.path is not None
        self.path.mkdir(parents=True, exist_ok=True)
        return QdrantClient(path=str(self.path))

    def kw(self) -> dict[str, Any]:
        return {"url": self.url} if self.url else {"path": self.path}


@pytest.fixture(params=LOCATIONS)
def loc(request, tmp_path) -> Iterator[Loc]:
    if request.param == "server":
        yield Loc(os.environ["QDRANT_URL"], None)
    else:
        yield Loc(None, tmp_path / "qdrant")


@pytest.fixture
def cname(loc) -> Iterator[str]:
    name = f"theirs_{uuid.uuid4().hex[:10]}"
    yield name
    if loc.url:
        with_client(loc, lambda c: c.delete_collection(name))


@pytest.fixture(scope="module")
def embedder(embed_model_path):
    from indexer.engine.adapters import LlamaEmbedder

    emb = LlamaEmbedder(embed_model_path)
    yield emb
    emb.close()


def with_client(loc: Loc, fn: Callable[[QdrantClient], Any]) -> Any:
    client = loc.client()
    try:
        return fn(client)
    finally:
        client.close()


def vecs(embedder, texts: list[str]) -> list[list[float]]:
    return embedder.embed_batch(texts, Normalization.L2).tolist()


def dump(loc: Loc, name: str) -> dict[str, Any]:
    """Everything a foreign user could observe: config, payload indexes, aliases and every point, as JSON text."""

    def read(client: QdrantClient) -> dict[str, Any]:
        info = client.get_collection(name)
        points: dict[str, str] = {}
        offset = None
        while True:
            records, offset = client.scroll(name, limit=256, offset=offset, with_payload=True, with_vectors=True)
            for r in records:
                points[str(r.id)] = json.dumps(
                    {"payload": r.payload, "vector": r.vector}, sort_keys=True, default=lambda o: o.model_dump()
                )
            if offset is None:
                break
        return {
            "config": info.config.model_dump_json(),
            # payload indexes: their kind and parameters (a server also counts indexed points, which ours add to)
            "schema": json.dumps(
                {k: v.model_dump(exclude={"points"}) for k, v in (info.payload_schema or {}).items()},
                sort_keys=True,
                default=str,
            ),
            "aliases": sorted(a.alias_name for a in client.get_collection_aliases(name).aliases),
            "points": points,
        }

    return with_client(loc, read)


# -- the foreign collections -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    kind: str  # detected layout
    vector: str  # the vector we should pick
    source_field: str
    make: Callable[[Loc, str, Any], None]
    framework: str | None = None  # importable module that made it


def langchain_embeddings(embedder) -> Any:
    """Our model behind LangChain's Embeddings interface (their collection is filled with the same model)."""
    from langchain_core.embeddings import Embeddings

    class Ours(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return vecs(embedder, texts)

        def embed_query(self, text: str) -> list[float]:
            return vecs(embedder, [text])[0]

    return Ours()


def make_langchain(loc: Loc, name: str, embedder) -> None:
    pytest.importorskip("langchain_qdrant")
    from langchain_qdrant import QdrantVectorStore

    store = QdrantVectorStore.from_texts(
        [t for t, _, _ in FOREIGN],
        langchain_embeddings(embedder),
        metadatas=[{"source": s, "topic": topic} for _, s, topic in FOREIGN],
        collection_name=name,
        **({"url": loc.url, "api_key": os.environ.get("QDRANT_API_KEY")} if loc.url else {"path": str(loc.path)}),
    )
    store.client.close()


def make_llamaindex(loc: Loc, name: str, embedder) -> None:
    pytest.importorskip("llama_index.vector_stores.qdrant")
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    client = loc.client()
    try:
        store = QdrantVectorStore(collection_name=name, client=client)
        texts = [t for t, _, _ in FOREIGN]
        nodes = [
            TextNode(text=t, metadata={"file_path": s, "file_name": Path(s).name, "topic": topic}, embedding=v)
            for (t, s, topic), v in zip(FOREIGN, vecs(embedder, texts), strict=True)
        ]
        store.add(nodes)
    finally:
        client.close()


def _make_haystack(loc: Loc, name: str, embedder, hybrid: bool) -> None:
    pytest.importorskip("haystack_integrations.document_stores.qdrant")
    from haystack import Document
    from haystack.dataclasses import SparseEmbedding
    from haystack.utils import Secret
    from haystack_integrations.document_stores.qdrant import QdrantDocumentStore

    where: dict[str, Any] = {"path": str(loc.path)}
    if loc.url:
        key = os.environ.get("QDRANT_API_KEY")
        where = {"url": loc.url, "api_key": Secret.from_token(key) if key else None}
    store = QdrantDocumentStore(index=name, embedding_dim=384, use_sparse_embeddings=hybrid, **where)
    docs = []
    for (text, source, topic), v in zip(FOREIGN, vecs(embedder, [t for t, _, _ in FOREIGN]), strict=True):
        sparse = SparseEmbedding(indices=[len(w) for w in text.split()][:5], values=[1.0] * 5) if hybrid else None
        if sparse is not None:
            sparse = SparseEmbedding(indices=sorted(set(sparse.indices)), values=[1.0] * len(set(sparse.indices)))
        docs.append(Document(content=text, meta={"file_path": source, "topic": topic}, embedding=v,
                             sparse_embedding=sparse))
    store.write_documents(docs)
    store.close()


def make_haystack(loc: Loc, name: str, embedder) -> None:
    _make_haystack(loc, name, embedder, hybrid=False)


def make_haystack_hybrid(loc: Loc, name: str, embedder) -> None:
    _make_haystack(loc, name, embedder, hybrid=True)


def make_plain_unnamed(loc: Loc, name: str, embedder) -> None:
    def go(c: QdrantClient) -> None:
        c.create_collection(name, vectors_config=qm.VectorParams(size=384, distance=qm.Distance.COSINE))
        c.create_payload_index(name, "url", field_schema=qm.PayloadSchemaType.KEYWORD)
        texts = [t for t, _, _ in FOREIGN]
        c.upsert(name, [
            qm.PointStruct(id=i + 1, vector=v, payload={"body": t, "url": s, "topic": topic, "tags": ["x"]})
            for i, ((t, s, topic), v) in enumerate(zip(FOREIGN, vecs(embedder, texts), strict=True))
        ])

    with_client(loc, go)


def make_plain_named(loc: Loc, name: str, embedder) -> None:
    """Several named vectors of different sizes and distances; ours fits 'mini' (Euclid: L2-normalized)."""
    rng = np.random.default_rng(0)

    def go(c: QdrantClient) -> None:
        c.create_collection(name, vectors_config={
            "small": qm.VectorParams(size=8, distance=qm.Distance.DOT),
            "mini": qm.VectorParams(size=384, distance=qm.Distance.EUCLID),
            "big": qm.VectorParams(size=768, distance=qm.Distance.COSINE),
        })
        c.create_payload_index(name, "source", field_schema=qm.PayloadSchemaType.KEYWORD)
        texts = [t for t, _, _ in FOREIGN]
        c.upsert(name, [
            qm.PointStruct(
                id=str(uuid.uuid4()),
                vector={"small": rng.random(8).tolist(), "mini": v, "big": rng.random(768).tolist()},
                payload={"text": t, "source": s, "topic": topic},
            )
            for (t, s, topic), v in zip(FOREIGN, vecs(embedder, texts), strict=True)
        ])

    with_client(loc, go)


def make_plain_dense_sparse(loc: Loc, name: str, embedder) -> None:
    def go(c: QdrantClient) -> None:
        c.create_collection(
            name,
            vectors_config={"dense": qm.VectorParams(size=384, distance=qm.Distance.DOT)},
            sparse_vectors_config={"bm25": qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
        )
        texts = [t for t, _, _ in FOREIGN]
        c.upsert(name, [
            qm.PointStruct(
                id=i + 100,
                vector={"dense": v, "bm25": qm.SparseVector(indices=[i, 50 + i], values=[0.5, 1.5])},
                payload={"document": t, "metadata": {"path": s, "topic": topic}},
            )
            for i, ((t, s, topic), v) in enumerate(zip(FOREIGN, vecs(embedder, texts), strict=True))
        ])

    with_client(loc, go)


CASES = {
    "langchain": Case("langchain", "", "metadata.source", make_langchain, "langchain_qdrant"),
    "llamaindex": Case("llamaindex", "", "file_path", make_llamaindex, "llama_index.vector_stores.qdrant"),
    "haystack": Case("haystack", "", "meta.file_path", make_haystack, "haystack_integrations"),
    "haystack-hybrid": Case("haystack", "text-dense", "meta.file_path", make_haystack_hybrid, "haystack_integrations"),
    "plain-unnamed": Case("custom", "", "url", make_plain_unnamed),
    "plain-named": Case("custom", "mini", "source", make_plain_named),
    "plain-dense-sparse": Case("custom", "dense", "metadata.path", make_plain_dense_sparse),
}


def _foreign_part(d: dict[str, Any], ours: set[str]) -> dict[str, Any]:
    return {**d, "points": {k: v for k, v in d["points"].items() if k not in ours}}


@pytest.mark.parametrize("case_id", list(CASES))
def test_attach_search_index_delete_leaves_theirs_unchanged(case_id, loc, cname, tmp_path, embedder):
    case = CASES[case_id]
    case.make(loc, cname, embedder)
    corpus = write_corpus(tmp_path / "corpus")
    before = dump(loc, cname)
    assert len(before["points"]) == len(FOREIGN)

    with attach(cname, **loc.kw(), embedder=embedder) as col:
        rep = col.report
        assert rep.points == len(FOREIGN) and rep.layout.kind == case.kind, rep.layout
        assert col.layout.source_field == case.source_field
        assert col.choice.name == case.vector and col.choice.normalization == Normalization.L2
        assert col.probe().verdict == "same" and col.probe().compared == len(FOREIGN)
        indexed = {"plain-unnamed": "url", "plain-named": "source"}.get(case_id)
        if indexed and loc.url:  # embedded Qdrant keeps no payload indexes; a server reports them
            assert indexed in rep.payload_indexes
        if case_id in ("haystack-hybrid", "plain-dense-sparse"):
            assert [s.name for s in rep.sparse] == (["text-sparse"] if case.kind == "haystack" else ["bm25"])

        # search theirs: their text, metadata and ids come back in their own terms
        found = col.search("how do glaciers shape valleys", k=2)
        top = found.hits[0]
        assert top.source == "/theirs/ice.md" and "Glaciers carve" in top.text and not top.ours
        assert top.metadata.get("topic") == "geo"
        # the user's Qdrant filter goes through unchanged
        flt = {"must": [{"key": case.source_field, "match": {"value": "/theirs/db.md"}}]}
        only = col.search("glaciers", filter=flt, k=5)
        assert [h.source for h in only.hits] == ["/theirs/db.md"]

        report = col.index([corpus])
        assert report.failed == [] and report.files_indexed == 5 and report.points_upserted >= 5
        bread = col.search("how do I make bread dough rise?", k=3)
        assert bread.hits[0].ours and bread.hits[0].source.endswith("bread.md")
        assert "flour" in bread.hits[0].text and bread.hits[0].metadata["start_line"] >= 1
        # theirs are still found next to ours
        assert col.search("volcano eruption pressure", k=1).hits[0].source == "/theirs/lava.md"

    after = dump(loc, cname)
    ours = set(after["points"]) - set(before["points"])
    assert len(ours) == report.points_upserted
    assert _foreign_part(after, ours) == before  # config, indexes, aliases and every foreign point: unchanged
    for pid in ours:
        point = json.loads(after["points"][pid])
        vector = point["vector"]
        assert (set(vector) == {case.vector}) if isinstance(vector, dict) else case.vector == ""

    # a deleted file removes only its own points
    (corpus / "baking" / "bread.md").unlink()
    with attach(cname, **loc.kw(), embedder=embedder) as col:
        second = col.index([corpus])
        assert second.files_removed == 1 and second.points_deleted >= 1
        assert not any(h.source and h.source.endswith("bread.md") for h in col.search("bread dough", k=10).hits)
        forgot = col.forget(corpus)
        assert forgot.files_removed == 4
    assert dump(loc, cname) == before


@pytest.mark.parametrize("case_id", ["langchain", "llamaindex", "haystack"])
def test_the_framework_reads_our_points_as_its_own(case_id, loc, cname, tmp_path, embedder):
    """Our points are written in their layout: the framework itself loads them as documents/nodes."""
    case = CASES[case_id]
    case.make(loc, cname, embedder)
    corpus = write_corpus(tmp_path / "corpus")
    with attach(cname, **loc.kw(), embedder=embedder) as col:
        col_points = col.index([corpus]).points_upserted
    query = vecs(embedder, ["Saturn has bright rings"])[0]
    conn = {"url": loc.url} if loc.url else {"path": str(loc.path)}
    if case_id == "langchain":
        from langchain_qdrant import QdrantVectorStore

        client = loc.client()
        try:
            store = QdrantVectorStore(client=client, collection_name=cname, embedding=langchain_embeddings(embedder))
            doc = store.similarity_search_by_vector(query, k=1)[0]
        finally:
            client.close()
        assert "Saturn" in doc.page_content and doc.metadata["source"].endswith("planets.txt")
    elif case_id == "llamaindex":
        from llama_index.core.vector_stores.types import VectorStoreQuery
        from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaStore

        client = loc.client()
        try:
            res = LlamaStore(collection_name=cname, client=client).query(
                VectorStoreQuery(query_embedding=query, similarity_top_k=1)
            )
        finally:
            client.close()
        node = res.nodes[0]
        assert "Saturn" in node.get_content() and node.metadata["file_path"].endswith("planets.txt")
    else:
        from haystack_integrations.document_stores.qdrant import QdrantDocumentStore

        store = QdrantDocumentStore(index=cname, embedding_dim=384, **conn)
        try:
            docs = store.filter_documents()
            top = store._query_by_embedding(query, top_k=1)[0]
        finally:
            store.close()
        assert len(docs) == len(FOREIGN) + col_points
        assert "Saturn" in (top.content or "") and top.meta["file_path"].endswith("planets.txt")


def test_facade_and_cli_work_on_an_attachment(loc, cname, tmp_path, embedder):
    make_plain_unnamed(loc, cname, embedder)
    corpus = write_corpus(tmp_path / "corpus")
    from typer.testing import CliRunner

    from indexer.cli.main import app

    where = ["--url", loc.url] if loc.url else ["--path", str(loc.path)]
    runner = CliRunner()
    alias = f"{cname}_alias"
    with_client(loc, lambda c: c.update_collection_aliases(change_aliases_operations=[
        qm.CreateAliasOperation(create_alias=qm.CreateAlias(collection_name=cname, alias_name=alias))
    ]))
    before = dump(loc, cname)
    shown = runner.invoke(app, ["qdrant", "inspect", alias, *where, "--json"])  # an alias names the collection
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["collection"] == cname and data["aliases"] == [alias] and data["points"] == len(FOREIGN)
    assert data["layout"]["text_field"] == "body" and data["dense_vectors"][0]["size"] == 384
    assert data["compatibility"]["vector"]["vector"] == "" and data["compatibility"]["probe"]["verdict"] == "same"

    done = runner.invoke(app, ["qdrant", "index", cname, str(corpus), *where, "--json"])
    assert done.exit_code == 0, done.output
    attached_as = json.loads(done.stdout)["attachment"]

    hits = runner.invoke(app, ["qdrant", "search", cname, "rings of Saturn", *where, "--json", "-k", "2"])
    assert hits.exit_code == 0, hits.output
    assert json.loads(hits.stdout)["hits"][0]["source"].endswith("planets.txt")

    # the ordinary facade sees the attachment as a collection (status counts only our points)
    with indexer.open_collection(attached_as) as col:
        assert col.status()["points"] == col.status()["chunks"] >= 5
        assert os.path.basename(col.search("exponential backoff retry").hits[0].path) == "retry.py"

    bad = runner.invoke(app, ["qdrant", "search", cname, "x", *where, "--filter", "{not json"])
    assert bad.exit_code == 1 and "not valid JSON" in bad.output
    # `indexer drop` on the attachment deletes our points and our state, never their collection
    dropped = runner.invoke(app, ["drop", attached_as, "--yes"])
    assert dropped.exit_code == 0, dropped.output
    assert dump(loc, cname) == before
    assert attached_as not in [r.name for r in indexer.list_collections()]
    gone = runner.invoke(app, ["qdrant", "detach", cname, *where, "--yes"])
    assert gone.exit_code == 0 and "deleted 0" in gone.output, gone.output


def test_search_reranks_and_passes_filters(loc, cname, embedder, reranker_model_path):
    make_plain_named(loc, cname, embedder)
    settings = indexer.load_settings(rerank_model=str(reranker_model_path))
    with attach(cname, **loc.kw(), embedder=embedder, settings=settings) as col:
        res = col.search("ice flowing downhill carves valleys", k=3, candidates=4)
        assert res.reranked and res.note.startswith("reranked 4 candidates") and res.vector == "mini"
        scores = [h.rerank_score for h in res.hits]
        assert len(scores) == 3 and all(s is not None for s in scores) and scores == sorted(scores, reverse=True)
        assert res.hits[0].source == "/theirs/ice.md"
        plain = col.search("ice flowing downhill carves valleys", k=3, rerank=False)
        assert not plain.reranked and plain.hits[0].rerank_score is None
        # Euclid: Qdrant's own score is a distance, lower is closer
        assert [h.score for h in plain.hits] == sorted(h.score for h in plain.hits)
        geo = qm.Filter(must=[qm.FieldCondition(key="topic", match=qm.MatchValue(value="geo"))])
        geo_hits = col.search("anything", filter=geo, k=10).hits
        assert {h.source for h in geo_hits} == {"/theirs/ice.md", "/theirs/lava.md"}
        with pytest.raises(indexer.InputError, match="invalid Qdrant filter"):
            col.search("x", filter={"must": [{"key": "topic", "match": {"bogus": 1}}]})
        with pytest.raises(indexer.InputError, match="k=0"):
            col.search("x", k=0)
        # a query longer than the model's limit is searched with the prefix that fits, as on the main path
        # (it was refused here); the words past the limit change nothing on the dense side
        long = "ice flowing downhill carves valleys " + "and more words after the limit " * 120
        assert embedder.count_tokens(long) > embedder.max_tokens
        cut = col.search(long, k=3, rerank=False)
        assert [h.source for h in cut.hits] == [h.source for h in
                                                col.search(fit_query(long, embedder), k=3, rerank=False).hits]
        assert cut.hits[0].source == "/theirs/ice.md"


def test_dimension_mismatch_is_refused_before_anything(loc, cname, tmp_path, embedder):
    def go(c: QdrantClient) -> None:
        c.create_collection(cname, vectors_config=qm.VectorParams(size=768, distance=qm.Distance.COSINE))
        c.upsert(cname, [qm.PointStruct(id=1, vector=[0.1] * 768, payload={"text": "x"})])

    with_client(loc, go)
    before = dump(loc, cname)
    corpus = write_corpus(tmp_path / "corpus")
    with attach(cname, **loc.kw(), embedder=embedder) as col, pytest.raises(
        CollectionMismatchError, match="768 dimensions, the model makes 384"
    ):
        col.index([corpus])
    with attach(cname, **loc.kw(), embedder=embedder, add_vector="ours") as col, pytest.raises(
        ConfigError, match="one unnamed vector"
    ):
        col.index([corpus])
    assert indexer.list_collections() == []
    assert dump(loc, cname) == before


def test_vectors_of_another_model_are_not_mixed_with_ours(loc, cname, tmp_path, embedder):
    rng = np.random.default_rng(1)

    def go(c: QdrantClient) -> None:
        c.create_collection(cname, vectors_config=qm.VectorParams(size=384, distance=qm.Distance.COSINE))
        c.upsert(cname, [
            qm.PointStruct(id=i, vector=rng.normal(size=384).tolist(), payload={"page_content": t, "metadata": {}})
            for i, (t, _, _) in enumerate(FOREIGN)
        ])

    with_client(loc, go)
    before = dump(loc, cname)
    with attach(cname, **loc.kw(), embedder=embedder) as col:
        probe = col.probe()
        assert probe.verdict == "other" and probe.agreement is not None and probe.agreement < 0.5
        with pytest.raises(CollectionMismatchError, match="another model"):
            col.index([write_corpus(tmp_path / "corpus")])
    assert dump(loc, cname) == before
    assert indexer.list_collections() == []
    # docs/qdrant-plugin.md: `--allow-other-model` (Python: allow_other_model=True) overrides the refusal
    with attach(cname, **loc.kw(), embedder=embedder) as col:
        report = col.index([tmp_path / "corpus"], allow_other_model=True)
        assert report.failed == [] and report.files_indexed == 5 and report.points_upserted >= 5
    assert [r.name for r in indexer.list_collections()] == [f"qdrant.{cname}"]


def _can_add_vectors(loc: Loc) -> bool:
    """Named vectors can be added with qdrant-client >= 1.18 (local mode included) and a server >= 1.18."""
    if not hasattr(QdrantClient, "create_vector_name"):
        return False
    if not loc.url:
        return True

    def version(c: QdrantClient) -> tuple[int, ...]:
        return tuple(int(x) for x in c.info().version.split(".")[:2])

    return with_client(loc, version) >= (1, 18)


def test_add_a_named_vector_for_our_model(loc, cname, tmp_path, embedder):
    rng = np.random.default_rng(2)

    def go(c: QdrantClient) -> None:
        c.create_collection(cname, vectors_config={"big": qm.VectorParams(size=768, distance=qm.Distance.COSINE)})
        c.upsert(cname, [
            qm.PointStruct(id=i, vector={"big": rng.random(768).tolist()}, payload={"text": t, "source": s})
            for i, (t, s, _) in enumerate(FOREIGN)
        ])

    with_client(loc, go)
    before = dump(loc, cname)
    if not _can_add_vectors(loc):  # the one case where refusing is right: it must say what to upgrade
        with attach(cname, **loc.kw(), embedder=embedder, add_vector="minilm") as col, pytest.raises(
            (ConfigError, StoreError), match=">= 1.18"
        ):
            col.index([write_corpus(tmp_path / "corpus")])
        return
    with attach(cname, **loc.kw(), embedder=embedder, add_vector="minilm") as col:
        report = col.index([write_corpus(tmp_path / "corpus")])  # any error here is a failure, not a skip
        assert report.files_indexed == 5 and col.choice.name == "minilm"
    after = dump(loc, cname)
    config = json.loads(after["config"])["params"]["vectors"]
    assert set(config) == {"big", "minilm"} and config["minilm"]["size"] == 384
    ours = set(after["points"]) - set(before["points"])
    assert after["points"].keys() - ours == before["points"].keys()
    assert all(after["points"][k] == v for k, v in before["points"].items())
    with attach(cname, **loc.kw(), embedder=embedder) as col:
        assert col.choice.name == "minilm"
        assert col.search("tomato seedlings", k=1).hits[0].source.endswith("tomatoes.rst")
    # the attachment writes into the slot recorded at attach time; asking for another one is refused
    with attach(cname, **loc.kw(), embedder=embedder, vector="big") as col, pytest.raises(
        ConfigError, match="writes into vector minilm"
    ):
        col.index([tmp_path / "corpus"])


def test_reindex_cannot_put_a_second_model_into_their_collection(loc, cname, tmp_path, embedder, embed_model_alt_path):
    """`indexer reindex` builds new vectors beside the old in a second store collection; an attachment has one
    slot in a foreign collection, so it is refused before anything is written (same size, another model file)."""
    from typer.testing import CliRunner

    from indexer.cli.main import app

    make_plain_unnamed(loc, cname, embedder)
    with attach(cname, **loc.kw(), embedder=embedder) as col:
        col.index([write_corpus(tmp_path / "corpus")])
        attached_as = col.name
    before = dump(loc, cname)
    result = CliRunner().invoke(app, ["reindex", "-c", attached_as, "--model", str(embed_model_alt_path)])
    assert result.exit_code != 0 and "cannot hold" in result.output, result.output
    assert dump(loc, cname) == before
    with indexer.open_collection(attached_as) as own:
        assert own.search("rings of Saturn").hits[0].path.endswith("planets.txt")


def test_an_empty_collection_gets_our_points_in_a_plain_layout(loc, cname, tmp_path, embedder):
    with_client(loc, lambda c: c.create_collection(
        cname, vectors_config=qm.VectorParams(size=384, distance=qm.Distance.DOT)
    ))
    before = dump(loc, cname)
    with attach(cname, **loc.kw(), embedder=embedder) as col:
        assert col.report.points == 0 and col.layout.kind == "custom" and col.probe().verdict == "unknown"
        col.index([write_corpus(tmp_path / "corpus")])
    with attach(cname, **loc.kw(), embedder=embedder) as col:  # re-attach: the layout is read back from our points
        assert (col.layout.text_field, col.layout.source_field) == ("text", "path") and col.report.ours > 0
        hit = col.search("patch a punctured inner tube", k=1).hits[0]
        assert hit.ours and hit.source.endswith("page.html") and hit.metadata["indexer"] == col.name
        col.detach()
    assert dump(loc, cname) == before
