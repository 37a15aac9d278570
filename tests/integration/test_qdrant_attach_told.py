"""The Qdrant plugin respects what it was told: a nested source field, the recorded vector and text field, --json
errors, folders that are not Qdrant storage, id collisions between attachments, vectors of another length, and the
lexical hint. Embedded Qdrant folders (no server needed)."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from typer.testing import CliRunner

import indexer
from indexer.core.normalization import Normalization
from indexer.errors import CollectionMismatchError, StoreError
from plugins.qdrant_attach import attach
from tests.integration.corpus import write_corpus
from tests.integration.test_qdrant_attach import FOREIGN, Loc, dump

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def embedder(embed_model_path):
    from indexer.engine.adapters import LlamaEmbedder

    emb = LlamaEmbedder(embed_model_path)
    yield emb
    emb.close()


@pytest.fixture
def env(tmp_path, monkeypatch, embed_model_path):
    """A data directory of its own for the CLI runs (settings from the environment)."""
    monkeypatch.setenv("INDEXER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("INDEXER_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.setenv("INDEXER_EMBED_MODEL", str(embed_model_path))
    return tmp_path


def _make(folder: Path, name: str, vectors: Any, points: list[qm.PointStruct]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    client = QdrantClient(path=str(folder))
    try:
        client.create_collection(name, vectors_config=vectors)
        if points:
            client.upsert(name, points)
    finally:
        client.close()


def _unit(embedder, texts: list[str]) -> np.ndarray:
    return embedder.embed_batch(texts, Normalization.L2)


def _cli(*args: str) -> Any:
    from indexer.cli.main import app

    return CliRunner().invoke(app, list(args))


def test_a_nested_source_field_is_written_nested_and_read_back(tmp_path, embedder, env):
    folder, name = tmp_path / "q", f"c_{uuid.uuid4().hex[:8]}"
    texts = [t for t, _, _ in FOREIGN]
    _make(folder, name, qm.VectorParams(size=384, distance=qm.Distance.COSINE), [
        qm.PointStruct(id=str(uuid.uuid4()), vector=v.tolist(), payload={"body": t, "info": {"origin": {"path": s}}})
        for (t, s, _), v in zip(FOREIGN, _unit(embedder, texts), strict=True)
    ])
    with attach(name, path=folder, embedder=embedder, source_field="info.origin.path") as col:
        col.index([write_corpus(tmp_path / "corpus")])
        hit = col.search("rings of Saturn", k=1).hits[0]
        assert hit.ours and hit.source and hit.source.endswith("planets.txt")
        assert hit.payload["info"]["origin"]["path"] == hit.source and "path" not in hit.payload
        theirs = col.search("glaciers carve valleys", k=1).hits[0]
        assert not theirs.ours and theirs.source == "/theirs/ice.md"
    with indexer.open_collection(col.name) as ours:  # the facade reads the source back too
        found = ours.search("rings of Saturn", k=1, mode="dense").hits[0]
    assert found.path.endswith("planets.txt")


def test_cli_search_uses_the_recorded_vector_and_text_field(tmp_path, embedder, env):
    folder, name = tmp_path / "q", f"c_{uuid.uuid4().hex[:8]}"
    texts = [t for t, _, _ in FOREIGN]
    vecs = _unit(embedder, texts)
    _make(folder, name, {"cos": qm.VectorParams(size=384, distance=qm.Distance.COSINE),
                         "dot": qm.VectorParams(size=384, distance=qm.Distance.DOT)}, [
        qm.PointStruct(id=str(uuid.uuid4()), vector={"cos": v.tolist(), "dot": v.tolist()},
                       payload={"text": f"label {i}", "content": t, "source": s})
        for i, ((t, s, _), v) in enumerate(zip(FOREIGN, vecs, strict=True))
    ])
    corpus = write_corpus(tmp_path / "corpus")
    done = _cli("qdrant", "index", name, str(corpus), "--path", str(folder), "--vector", "cos",
                "--text-field", "content", "--json")
    assert done.exit_code == 0, done.output
    found = _cli("qdrant", "search", name, "glaciers carving valleys", "--path", str(folder), "--json", "-k", "3")
    assert found.exit_code == 0, found.output  # not "several vectors fit"
    result = json.loads(found.stdout)
    assert result["vector"] == "cos"
    top = result["hits"][0]
    assert top["source"] == "/theirs/ice.md" and top["text"].startswith("Glaciers carve")  # 'content', not 'label'


def test_json_errors_are_an_error_object_on_stdout(tmp_path, env):
    folder = tmp_path / "q"
    QdrantClient(path=str(folder)).close()  # an empty embedded Qdrant folder
    missing = _cli("qdrant", "inspect", "nope", "--path", str(folder), "--json")
    badfilter = _cli("qdrant", "search", "nope", "x", "--path", str(folder), "--json", "--filter", "{bad")
    for run in (missing, badfilter):
        assert run.exit_code == 1, run.output
        error = json.loads(run.stdout)["error"]
        assert error["type"] and error["message"]
    assert "nope" in json.loads(missing.stdout)["error"]["message"]
    assert "--filter" in json.loads(badfilter.stdout)["error"]["message"]


@pytest.mark.parametrize("command", [["inspect", "x"], ["search", "x", "query"], ["detach", "x", "--yes"]])
def test_commands_never_write_into_a_folder_that_is_not_qdrant_storage(tmp_path, env, command):
    notq = tmp_path / "notq"
    notq.mkdir()
    (notq / "mine.txt").write_text("my own file\n")
    run = _cli("qdrant", *command, "--path", str(notq))
    assert run.exit_code == 1 and "not an embedded Qdrant folder" in run.output, run.output
    assert sorted(p.name for p in notq.iterdir()) == ["mine.txt"]


def test_an_id_collision_between_attachments_is_named_and_the_refused_run_records_nothing(tmp_path, embedder, env):
    folder, name = tmp_path / "q", f"c_{uuid.uuid4().hex[:8]}"
    texts = [t for t, _, _ in FOREIGN]
    _make(folder, name, qm.VectorParams(size=384, distance=qm.Distance.COSINE), [
        qm.PointStruct(id=str(uuid.uuid4()), vector=v.tolist(), payload={"text": t, "source": s})
        for (t, s, _), v in zip(FOREIGN, _unit(embedder, texts), strict=True)
    ])
    corpus = write_corpus(tmp_path / "corpus")
    with attach(name, path=folder, embedder=embedder) as first:
        first.index([corpus])
        owner = first.name
    after_first = dump(Loc(None, folder), name)
    with (
        attach(name, path=folder, embedder=embedder, as_name="qdrant.second") as second,
        pytest.raises(StoreError) as exc,
    ):
        second.index([corpus])
    message = str(exc.value)
    assert owner in message and "did not write" not in message and "--as" not in message
    assert "qdrant.second" not in [r.name for r in indexer.list_collections()]
    assert dump(Loc(None, folder), name) == after_first


def test_dot_vectors_of_another_length_are_flagged_and_not_mixed_with_ours(tmp_path, embedder, env):
    folder, name = tmp_path / "q", f"c_{uuid.uuid4().hex[:8]}"
    texts = [t for t, _, _ in FOREIGN]
    _make(folder, name, qm.VectorParams(size=384, distance=qm.Distance.DOT), [
        qm.PointStruct(id=str(uuid.uuid4()), vector=(3.0 * v).tolist(), payload={"text": t, "source": s})
        for (t, s, _), v in zip(FOREIGN, _unit(embedder, texts), strict=True)
    ])
    before = dump(Loc(None, folder), name)
    with attach(name, path=folder, embedder=embedder) as col:
        probe = col.check()["probe"]
        assert probe["verdict"] == "same" and abs(probe["norm"] - 3.0) < 0.01  # same direction, other length
        assert probe["scale"] and "different scales" in probe["scale"]
        with pytest.raises(CollectionMismatchError, match="different scales"):
            col.index([write_corpus(tmp_path / "corpus")])
        assert col.search("glaciers", k=1).hits[0].source == "/theirs/ice.md"  # searching stays allowed
    assert col.name not in [r.name for r in indexer.list_collections()]
    assert dump(Loc(None, folder), name) == before
    shown = _cli("qdrant", "inspect", name, "--path", str(folder))
    assert shown.exit_code == 0 and "scale" in shown.stdout and "different" in shown.stdout


def test_the_lexical_hint_of_an_attachment_says_it_has_none(tmp_path, embedder, env, caplog):
    folder, name = tmp_path / "q", f"c_{uuid.uuid4().hex[:8]}"
    _make(folder, name, qm.VectorParams(size=384, distance=qm.Distance.COSINE), [])
    with attach(name, path=folder, embedder=embedder) as col:
        col.index([write_corpus(tmp_path / "corpus")])
    with indexer.open_collection(col.name, search_mode="hybrid") as ours, caplog.at_level(logging.WARNING):
        hits = ours.search("rings of Saturn", k=1).hits
        note = ours.status()["lexical_note"]
    assert hits[0].path.endswith("planets.txt")
    warned = " ".join(r.getMessage() for r in caplog.records if "lexical" in r.getMessage())
    assert "keeps no lexical index" in warned and "builds it" not in warned
    assert "keeps no lexical index" in note
