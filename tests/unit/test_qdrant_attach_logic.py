"""Attach plugin logic without a model or a store: layout detection, payload round trips, vector choice."""

from __future__ import annotations

import json

import pytest

from indexer.core.normalization import Normalization
from indexer.errors import CollectionMismatchError, ConfigError, InputError
from plugins.qdrant_attach.api import as_filter, default_name
from plugins.qdrant_attach.compat import choose_vector
from plugins.qdrant_attach.inspection import CollectionReport, DenseVector
from plugins.qdrant_attach.layout import Layout, detect, with_overrides

LANGCHAIN = {"page_content": "bread rises", "metadata": {"source": "/docs/bread.md", "page": 1}}
LLAMA = {
    "file_path": "/docs/llama.md",
    "file_name": "llama.md",
    "_node_content": json.dumps({"id_": "x", "text": "llamas hum", "metadata": {"file_path": "/docs/llama.md"}}),
    "_node_type": "TextNode",
    "document_id": "None",
    "doc_id": "None",
    "ref_doc_id": "None",
}
HAYSTACK = {"id": "abc", "content": "stacks of hay", "blob": None, "meta": {"file_path": "/h/hay.txt"}, "score": None}
CUSTOM = {"body": "a custom text", "url": "https://example.org/a", "tags": ["x"]}


@pytest.mark.parametrize(
    "payload, kind, text, source, meta_key",
    [
        (LANGCHAIN, "langchain", "bread rises", "metadata.source", "page"),
        (LLAMA, "llamaindex", "llamas hum", "file_path", "file_name"),
        (HAYSTACK, "haystack", "stacks of hay", "meta.file_path", "file_path"),
        (CUSTOM, "custom", "a custom text", "url", "tags"),
    ],
)
def test_detect_reads_text_source_and_metadata(payload, kind, text, source, meta_key):
    layout, counts = detect([payload] * 3)
    assert layout.kind == kind and layout.source_field == source
    assert layout.text(payload) == text
    assert meta_key in layout.metadata(payload)
    assert layout.source(payload) == (payload.get("url") or layout.metadata(payload).get(source.split(".")[-1]))
    assert sum(counts.values()) == 3


def test_detect_follows_the_majority_and_ignores_our_points():
    ours = Layout("haystack", "content", "meta", "meta.file_path").build("id", "t", {"file_path": "/x"}, "qdrant.c")
    layout, counts = detect([LANGCHAIN, LANGCHAIN, HAYSTACK, ours, ours, ours])
    assert layout.kind == "langchain" and counts == {"langchain": 2, "haystack": 1}


@pytest.mark.parametrize("kind", ["langchain", "llamaindex", "haystack", "custom"])
def test_built_payload_reads_back_in_the_same_layout(kind):
    base, _ = detect([{"langchain": LANGCHAIN, "llamaindex": LLAMA, "haystack": HAYSTACK, "custom": CUSTOM}[kind]])
    payload = base.build("pid", "our chunk", {base.source_key(): "/ours/a.md", "start_line": 3}, "qdrant.c")
    again, _ = detect([payload], marker_excluded=False)
    assert again.kind == kind
    assert base.text(payload) == "our chunk" and base.source(payload) == "/ours/a.md"
    assert base.is_ours(payload, "qdrant.c") and not base.is_ours(payload, "other")
    assert base.metadata(payload)["start_line"] == 3


def test_llamaindex_node_content_is_a_text_node():
    layout, _ = detect([LLAMA])
    node = json.loads(layout.build("pid", "txt", {"file_path": "/a"}, "m")["_node_content"])
    assert node["class_name"] == "TextNode" and node["text"] == "txt" and node["id_"] == "pid"


def test_overrides_replace_every_guess():
    layout, _ = detect([CUSTOM])
    forced = with_overrides(layout, text_field="tags", source_field="", metadata_field="meta")
    assert (forced.text_field, forced.source_field, forced.metadata_field) == ("tags", None, "meta")
    switched = with_overrides(layout, kind="langchain")
    assert (switched.text_field, switched.metadata_field, switched.source_field) == (
        "page_content",
        "metadata",
        "metadata.source",
    )
    with pytest.raises(ConfigError, match="unknown payload layout"):
        with_overrides(layout, kind="weaviate")


def _report(*vectors: DenseVector, named: bool = True) -> CollectionReport:
    return CollectionReport(
        name="c",
        location="mem",
        points=0,
        status="green",
        named_vectors=named,
        dense=vectors,
        sparse=(),
        payload_indexes={},
        aliases=(),
        sample_size=0,
        fields=(),
        layout=Layout("custom", "text", None, None),
    )


def test_choose_vector_picks_the_one_that_fits():
    rep = _report(
        DenseVector("small", 8, "dot", "float32", None),
        DenseVector("mini", 384, "euclid", "float32", None),
        DenseVector("big", 768, "cosine", "float32", None),
    )
    choice = choose_vector(rep, dimensions=384, similarity="cosine", model="m")
    assert choice.name == "mini" and choice.using == "mini" and choice.normalization == Normalization.L2
    with pytest.raises(CollectionMismatchError) as exc:
        choose_vector(rep, dimensions=384, similarity="cosine", model="m", requested="big")
    assert "768" in str(exc.value) and "384" in str(exc.value) and "'mini'" in str(exc.value)
    with pytest.raises(ConfigError, match="no dense vector named 'nope'"):
        choose_vector(rep, dimensions=384, similarity="cosine", model="m", requested="nope")


def test_choose_vector_refuses_with_reasons_and_hints():
    rep = _report(
        DenseVector("l1", 384, "manhattan", "float32", None),
        DenseVector("colbert", 384, "cosine", "float32", "max_sim"),
        DenseVector("bytes", 384, "cosine", "uint8", None),
    )
    with pytest.raises(CollectionMismatchError) as exc:
        choose_vector(rep, dimensions=384, similarity="cosine", model="m")
    msg = str(exc.value)
    assert "manhattan" in msg and "multivector" in msg and "uint8" in msg and "--add-vector" in msg
    unnamed = _report(DenseVector("", 768, "cosine", "float32", None), named=False)
    with pytest.raises(CollectionMismatchError, match="768 dimensions, the model makes 384") as exc2:
        choose_vector(unnamed, dimensions=384, similarity="cosine", model="m")
    assert "--add-vector" not in str(exc2.value)


def test_choose_vector_several_fits_needs_a_choice_unless_one_is_unnamed():
    a, b = DenseVector("a", 4, "cosine", "float32", None), DenseVector("b", 4, "dot", "float32", None)
    with pytest.raises(ConfigError, match="--vector"):
        choose_vector(_report(a, b), dimensions=4, similarity="cosine", model="m")
    unnamed = DenseVector("", 4, "cosine", "float32", None)
    assert choose_vector(_report(a, unnamed), dimensions=4, similarity="cosine", model="m").name == ""


def test_filter_is_validated_not_rewritten():
    raw = {"must": [{"key": "metadata.source", "match": {"value": "/a"}}]}
    flt = as_filter(raw)
    assert flt is not None and flt.model_dump(exclude_none=True) == raw
    with pytest.raises(InputError, match="invalid Qdrant filter"):
        as_filter({"must": [{"key": "x", "match": {"nonsense": 1}}]})
    with pytest.raises(InputError):
        as_filter("must")  # type: ignore[arg-type]


def test_default_name_is_a_valid_collection_name():
    assert default_name("my docs/v2") == "qdrant.my_docs_v2"


def test_document_locator_and_metadata_travel_into_a_foreign_layout_and_back():
    from plugins.qdrant_attach.attached_store import _metadata, _ours_terms

    layout = Layout("langchain", "page_content", "metadata", "metadata.source")
    ours = {
        "path": "/d/deck.pptx", "rel_path": "deck.pptx", "file_type": "pptx", "chunk_index": 1, "start_line": 4,
        "end_line": 6, "page": None, "heading": ["Results"], "locator": "slide 2: Results",
        "location": {"slide": 2, "title": "Results"}, "metadata": {"author": "Grace Hopper"}, "text": "numbers",
    }  # fmt: skip
    flat = _metadata(layout, ours)
    assert flat["locator"] == "slide 2: Results" and flat["slide"] == 2 and flat["author"] == "Grace Hopper"
    assert all(not isinstance(v, (dict, list)) for v in flat.values())  # their layouts take flat metadata
    back = _ours_terms(layout, layout.build("id", "numbers", flat, "marker"))
    assert back["locator"] == "slide 2: Results" and back["heading"] == ["Results"]
    assert back["metadata"]["author"] == "Grace Hopper" and back["path"] == "/d/deck.pptx"


@pytest.mark.parametrize(
    "base, source_field",
    [
        (Layout("custom", "body", None, None), "info.origin.path"),
        (Layout("custom", "body", "metadata", None), "metadata.info.origin.path"),
        (Layout("langchain", "page_content", "metadata", None), "metadata.origin.path"),
        (Layout("langchain", "page_content", "metadata", None), "extra.src"),  # outside the metadata
    ],
)
def test_a_nested_source_field_is_written_where_it_is_read(base, source_field):
    from plugins.qdrant_attach.attached_store import _metadata

    layout = with_overrides(base, source_field=source_field)
    payload = layout.build("id-1", "some text", _metadata(layout, {"path": "/n/a.md", "start_line": 3}), "qdrant.x")
    assert layout.source(payload) == "/n/a.md"
    parts = source_field.split(".")
    node = payload
    for part in parts[:-1]:
        node = node[part]
    assert node[parts[-1]] == "/n/a.md"
    flat = layout.metadata(payload)
    assert layout.source_key() not in flat or flat[layout.source_key()] != "/n/a.md"  # not also at a wrong key
    assert layout.is_ours(payload, "qdrant.x") and layout.text(payload) == "some text"
    assert flat.get("start_line") == 3


def test_a_plain_source_key_stays_where_the_framework_keeps_it():
    layout = with_overrides(Layout("langchain", "page_content", "metadata", None), source_field="metadata.src")
    payload = layout.build("id-1", "t", {"src": "/a.md"}, "m")
    assert payload["metadata"]["src"] == "/a.md" and layout.nested_source() is None


def test_with_payload_keys_are_dotted_paths_as_in_qdrant():
    from plugins.qdrant_attach.http import _select

    payload = {"page_content": "t", "metadata": {"source": "/a.md", "page": 2, "deep": {"x": 1}}}
    assert _select(payload, ["metadata.source"]) == {"metadata": {"source": "/a.md"}}
    assert _select(payload, {"include": ["metadata.deep.x", "page_content"]}) == {
        "metadata": {"deep": {"x": 1}}, "page_content": "t"}
    assert _select(payload, {"exclude": ["metadata.page", "page_content"]}) == {
        "metadata": {"source": "/a.md", "deep": {"x": 1}}}
    assert payload["metadata"]["page"] == 2  # the stored payload is never changed
    assert _select(payload, ["missing.key"]) == {} and _select(payload, False) is None
