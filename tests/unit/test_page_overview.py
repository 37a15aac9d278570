"""The pieces the search page's overview and viewer stand on: model names for a person, example queries from a
collection's titles and file names, and the viewer's marks (the snippet's own word matching, on a hit's lines)."""

from __future__ import annotations

from types import SimpleNamespace

from indexer.collection.overview import example_queries, model_name
from indexer.search.snippets import passage_marks, snippet


def test_model_name_drops_the_fingerprint_and_tokenizer_tag() -> None:
    assert model_name("all-MiniLM-L6-v2-0a1b2c3d4e5f") == "all-MiniLM-L6-v2"
    assert model_name("bge-small-en-v1.5-0a1b2c3d4e5f+tok-hf") == "bge-small-en-v1.5"
    assert model_name("test-reranker-q8_0.gguf") == "test-reranker-q8_0"
    assert model_name("bge-reranker-v2-m3") == "bge-reranker-v2-m3"  # nothing to drop: kept whole
    assert model_name(None) is None


class _State:
    """The two state reads example_queries makes (a fake: this tests our choice of examples)."""

    def __init__(self, titles: list[tuple[str, int]], paths: list[str]) -> None:
        self._paths = paths
        self.fields = SimpleNamespace(commonest=lambda collection, names, limit, chunks: titles[:limit])

    def paths(self, collection: str, limit: int) -> list[str]:
        return self._paths[:limit]


def test_example_queries_take_titles_first_then_file_name_words_spread_over_folders() -> None:
    paths = [f"/r/a/{n}.md" for n in ("README", "key-rotation_2024", "backupPolicy", "x1")] + [
        f"/r/b/{n}.txt" for n in ("pasta recipe", "garden-notes", "tax 2023 return", "the_and_of")]
    state = _State([("Quarterly budget", 4), ("quarterly BUDGET", 1), ("x" * 80, 1)], paths)
    got = example_queries(state, "c", 100, limit=5)  # type: ignore[arg-type]
    assert got[0] == "Quarterly budget"  # the commonest title first; a case variant and an overlong one left out
    assert len(got) == 5 and len({g.casefold() for g in got}) == 5
    assert "key rotation" in got and "backup policy" in got
    assert any(g in ("pasta recipe", "garden notes", "tax return") for g in got)  # the second folder too
    assert not any(g in ("readme", "", "the and of") for g in got)  # generic names and stopwords left out


def test_example_queries_of_an_empty_collection() -> None:
    assert example_queries(_State([], []), "c", 0) == []  # type: ignore[arg-type]


def test_passage_marks_are_the_snippets_words_on_the_given_lines_only() -> None:
    text = "# Key rotation\n\nTo rotate the API keys, run vault rotate.\nThe keys of the car."
    marks = passage_marks(text, "rotating the keys", 3, 3)
    assert [text[a:b] for a, b in marks] == ["rotate", "keys", "rotate"]  # stems; no stopword
    line3 = text.split("\n")[2]
    _, snippet_marks = snippet(line3, "rotating the keys")
    assert len(snippet_marks) == len(marks)  # what the hit's snippet marks, the viewer marks
    assert [text[a:b] for a, b in passage_marks(text, "keys rotation")] == [
        "Key", "rotation", "rotate", "keys", "rotate", "keys"]  # one stem: rotation, rotate
    assert passage_marks(text, "keys", 9, 12) == []  # past the end
    assert [text[a:b] for a, b in passage_marks(text, "car", 4)] == ["car"]


def test_commonest_titles_from_a_uniform_sample_of_chunks(tmp_path) -> None:
    """FieldIndex.commonest over a real state database: exact when the sample covers the collection; a sample
    of a sixth of it still ranks the values as the whole does, reading about that many rows."""
    import uuid

    from indexer.state.database import StateStore

    state = StateStore(tmp_path / "state.db")
    try:
        subjects = ["Budget 2025"] * 1800 + ["Team offsite"] * 900 + ["Invoice"] * 300
        rows = [("c", str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")), "subject", s, s.lower(), None, "text")
                for i, s in enumerate(subjects)]
        rows += [("c", r[1], "sender", "ada", "ada", None, "text") for r in rows[:100]]  # another field: not counted
        with state._tx() as db:
            db.executemany("INSERT INTO chunk_fields VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        fields = state.fields
        assert fields.commonest("c", ("title", "subject"), 5, chunks=3000, sample=5000) == [
            ("Budget 2025", 1800), ("Team offsite", 900), ("Invoice", 300)]
        sampled = fields.commonest("c", ("title", "subject"), 2, chunks=3000, sample=500)
        assert [v for v, _ in sampled] == ["Budget 2025", "Team offsite"]
        assert 250 <= sampled[0][1] + sampled[1][1] <= 650  # about 500 chunks read, not 3,000
        assert fields.commonest("c", ("title",), 5, chunks=3000) == []
        assert fields.commonest("other", ("subject",), 5, chunks=0) == []
    finally:
        state.close()
