"""Prove prose chunking unchanged: chunk a corpus with this tree's chunker and with another commit's, compare.

    python tools/compare_chunking.py [REF] [--corpus ../shared/eval/scifact-train/corpus.jsonl]

Chunks every abstract of a BEIR corpus as plain text and as the Markdown file bench/retrieval_quality.py writes,
and docs/*.md as Markdown and as reST, with a deterministic fake counter (128 tokens); prints the chunk count
and a hash of every chunk's text, spans, lines, tokens, page and heading for both chunkers.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from indexer.index.chunking import TokenChunker
from indexer.types import Document, SourceRef

ROOT = Path(__file__).resolve().parents[1]


class Counter:
    max_tokens = 128

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + len(text) // 9 + 2


def _chunker_at(ref: str) -> type:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:indexer/index/chunking.py"], check=True,
                            capture_output=True, text=True).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "ref_chunking.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ref_chunking", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ref_chunking"] = module
    spec.loader.exec_module(module)
    return module.TokenChunker  # type: ignore[no-any-return]


def _documents(corpus: Path) -> list[tuple[str, str, str]]:
    docs = []
    for i, line in enumerate(corpus.read_text().splitlines()):
        d = json.loads(line)
        docs.append((f"/r/{i}.txt", "text", d.get("title", "") + "\n\n" + d.get("text", "")))
        docs.append((f"/r/{i}.md", "markdown", "# " + d.get("title", "") + "\n\n" + d.get("text", "") + "\n"))
    for p in sorted((ROOT / "docs").glob("*.md")):
        docs.append((str(p), "markdown", p.read_text()))
        docs.append((str(p) + ".rst", "rst", p.read_text()))
    return docs


def digest(chunker_class: type, docs: list[tuple[str, str, str]]) -> tuple[int, str]:
    chunker = chunker_class(Counter(), overlap_tokens=32)
    h, n = hashlib.sha256(), 0
    for path, kind, text in docs:
        for c in chunker.chunk(Document(SourceRef("/r", path, len(text), 0), text, kind)):
            h.update(repr((c.text, c.start_byte, c.end_byte, c.start_line, c.end_line, c.n_tokens, c.page,
                           c.heading)).encode())  # fmt: skip
            n += 1
    return n, h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", nargs="?", default="main")
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared/eval/scifact-train/corpus.jsonl")
    args = parser.parse_args()
    docs = _documents(args.corpus)
    here, there = digest(TokenChunker, docs), digest(_chunker_at(args.ref), docs)
    print(f"this tree: {here[0]} chunks {here[1]}\n{args.ref}: {there[0]} chunks {there[1]}")
    print("identical" if here == there else "DIFFERENT")
    sys.exit(0 if here == there else 1)


if __name__ == "__main__":
    main()
