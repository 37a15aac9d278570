"""TokenChunker against the default model's own tokenizer (llama.cpp, vocab only): every chunk of real
Markdown, Python and HTML files fits ``max_tokens`` as the model counts it, and every span maps back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from indexer.index.chunking import TokenChunker
from indexer.types import Chunk, Document, SourceRef
from plugins.filesystem import FilesystemSource

REPO = Path(__file__).resolve().parents[2]

MARKDOWN = """# Rotating keys

Keys are rotated **every 90 days**. The rotation job runs at 03:00 UTC; see `ops/rotate.py`.

## Steps

1. Create the new key: `kms create --alias next`.
2. Re-encrypt the data keys — this takes about 20 minutes for 1 TB (ünïcödé, 日本語, emoji 🎉).
3. Switch the alias and keep the old key for 7 days.

```bash
for key in $(kms list --alias current); do
    kms rotate "$key" --wait

    echo "rotated $key"
done
```

| Column | Meaning |
|--------|---------|
| id     | the key id, a UUID like 123e4567-e89b-12d3-a456-426614174000 |

## A very long paragraph

""" + " ".join(
    f"Sentence {i} explains step {i % 7} with detail-{i}, numbers {i * 37 % 1000}, and symbols #{i}!"
    for i in range(400)
)


class LlamaTokenCounter:
    """The exact count the embedder sees: special tokens (CLS/SEP) included."""

    def __init__(self, model_path: Path, max_tokens: int) -> None:
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(model_path), embedding=True, vocab_only=True, verbose=False)
        self.max_tokens = max_tokens
        self.calls = 0

    def count_tokens(self, text: str) -> int:
        self.calls += 1
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))


@pytest.fixture(scope="module")
def counter(embed_model_path: Path) -> Iterator[LlamaTokenCounter]:
    yield LlamaTokenCounter(embed_model_path, 512)


def documents(tmp_path: Path) -> list[Document]:
    (tmp_path / "guide.md").write_text(MARKDOWN, encoding="utf-8")
    (tmp_path / "page.html").write_text(
        "<html><head><title>Guide</title><script>x()</script></head><body><h1>Install</h1>"
        + "".join(f"<p>Paragraph {i} with <b>bold</b> words and more words.</p>" for i in range(200))
        + "</body></html>",
        encoding="utf-8",
    )
    source = FilesystemSource([tmp_path, REPO / "indexer" / "chunking.py", REPO / "plugins" / "filesystem"])
    docs = [source.read(ref) for ref in source.scan()]
    assert {d.kind for d in docs} >= {"markdown", "code", "html"}
    return docs


def check(doc: Document, chunks: list[Chunk], counter: LlamaTokenCounter, limit: int) -> None:
    encoded = doc.text.encode("utf-8")
    assert chunks, doc.ref.path
    for chunk in chunks:
        assert chunk.n_tokens == counter.count_tokens(chunk.text)
        assert chunk.n_tokens <= limit, (doc.ref.path, chunk.index, chunk.n_tokens)
        assert chunk.text == encoded[chunk.start_byte : chunk.end_byte].decode("utf-8")
        first_line = doc.text.split("\n")[chunk.start_line - 1]
        assert chunk.text.split("\n")[0] in first_line
    covered: set[int] = set()
    for chunk in chunks:
        covered.update(range(chunk.start_byte, chunk.end_byte))
    content = {i for i, byte in enumerate(encoded) if byte not in b" \t\n\r\x0b\x0c"}
    assert content <= covered, f"{doc.ref.path}: text missing from every chunk"


@pytest.mark.parametrize("limit,overlap", [(512, 32), (128, 16), (40, 8)])
def test_chunks_fit_the_real_tokenizer(tmp_path: Path, counter: LlamaTokenCounter, limit: int, overlap: int) -> None:
    chunker = TokenChunker(counter, max_tokens=limit, overlap_tokens=overlap)
    for doc in documents(tmp_path):
        chunks = list(chunker.chunk(doc))
        check(doc, chunks, counter, limit)
        if doc.kind == "markdown":
            headings = {c.heading for c in chunks}
            assert ("Rotating keys", "Steps") in headings
            assert ("Rotating keys", "A very long paragraph") in headings
        assert list(chunker.chunk(doc)) == chunks  # deterministic


def test_tokenizer_work_stays_linear(tmp_path: Path, counter: LlamaTokenCounter) -> None:
    text = "\n\n".join(MARKDOWN.split("\n\n")[:-1]) + "\n\n"
    ref = SourceRef(root=str(tmp_path), path=str(tmp_path / "big.md"), size=0, mtime_ns=0)
    chunker = TokenChunker(counter, max_tokens=256, overlap_tokens=32)

    def calls(copies: int) -> int:
        doc = Document(ref=ref, text=text * copies, kind="markdown")
        counter.calls = 0
        chunks = list(chunker.chunk(doc))
        n_calls = counter.calls
        check(doc, chunks, counter, 256)
        return n_calls

    small, big = calls(6), calls(60)
    assert big / small < 10 * 1.3, (small, big)  # tokenizer calls grow linearly (wall clock: bench/)
