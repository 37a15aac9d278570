"""Markdown front matter (YAML ``---``, TOML ``+++``) is the file's metadata, not text: the real reader and the
real chunker; line numbers and byte offsets of the body are unchanged."""

from __future__ import annotations

from indexer.index.chunking import TokenChunker
from indexer.plugin_api import SourceRef
from plugins.filesystem.readers import MarkdownReader
from tests.unit.test_chunking import WordCounter

NOTE = (
    "---\ntitle: Garden log\nauthor: Ada Lovelace\ndate: 2025-03-04\ntags: [garden, tomatoes]\ndraft: false\n"
    "rating: 4\nextra:\n  nested: 1\n---\n# Watering\n\nThe tomatoes need water twice a week.\n"
)


def _read(text: str):
    data = text.encode()
    return MarkdownReader().read(SourceRef("/r", "/r/note.md", len(data), 0), data)


def test_yaml_front_matter_is_metadata_and_not_text():
    doc = _read(NOTE)
    assert dict(doc.metadata) == {"title": "Garden log", "author": "Ada Lovelace", "date": "2025-03-04",
                                  "tags": "garden, tomatoes", "draft": "false", "rating": 4}
    assert "Ada" not in doc.text and "title:" not in doc.text
    assert len(doc.text.encode()) == len(NOTE.encode()) and doc.text.count("\n") == NOTE.count("\n")
    assert doc.text.index("# Watering") == NOTE.index("# Watering")


def test_toml_front_matter_and_files_without_it():
    doc = _read("+++\ntitle = 'Hugo post'\ndate = 2025-01-02T10:00:00Z\n+++\nBody é\n")
    assert dict(doc.metadata) == {"title": "Hugo post", "date": "2025-01-02T10:00:00+00:00"}
    assert doc.text.strip() == "Body é"
    plain = "# Title\n\n---\nnot: front matter\n---\n"
    assert _read(plain).text == plain and _read(plain).metadata == ()
    broken = "---\n: [unclosed\n---\ntext\n"  # not YAML: the file's text, as before
    assert _read(broken).text == broken and _read(broken).metadata == ()
    listed = "---\n- a\n- b\n---\ntext\n"  # YAML, but not a mapping
    assert _read(listed).metadata == ()


def test_no_chunk_holds_the_front_matter():
    chunks = list(TokenChunker(WordCounter(64), overlap_tokens=8).chunk(_read(NOTE)))
    assert chunks and all("author" not in c.text and "Ada" not in c.text for c in chunks)
    assert chunks[0].start_line == NOTE.splitlines().index("# Watering") + 1
