"""Wall-clock checks that used to be test assertions: scanning and chunking scale linearly and stay quick.

Tests assert deterministic work counts (characters and tokenizer calls); this script reports the time, as
ratios measured in the same run (the machine is shared and noisy), and the absolute figures for reference:

* chunking: seconds for 200 vs 2,000 paragraphs (ratio; linear work means ~10x), and 2,000 paragraphs' seconds
  (was ``big_seconds < 2.0`` in tests/unit/test_chunking.py);
* scan: 2,000 files with ignore rules (was ``< 0.5 s``), and a tree with symlink loops (was ``< 5 s``).

Usage: python bench/scan_chunk_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from indexer.index.chunking import TokenChunker
from indexer.types import Document, SourceRef
from plugins.filesystem import FilesystemSource


class WordCounter:
    """Whitespace words + 2 specials: the tokenizer stand-in the unit tests use."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2


def chunk_seconds(n_paragraphs: int) -> float:
    text = "\n\n".join(" ".join(f"w{p}_{i}" for i in range(30)) for p in range(n_paragraphs))
    doc = Document(ref=SourceRef(root="/r", path="/r/doc.txt", size=0, mtime_ns=0), text=text, kind="text")
    start = time.perf_counter()
    list(TokenChunker(WordCounter(128), overlap_tokens=16).chunk(doc))
    return time.perf_counter() - start


def scan_seconds(root: Path) -> tuple[float, int]:
    start = time.perf_counter()
    n = sum(1 for _ in FilesystemSource([root]).scan())
    return time.perf_counter() - start, n


def build_tree(root: Path) -> None:
    (root / ".gitignore").write_text("*.log\nignored/\n")
    for d in range(40):
        folder = root / f"dir{d}"
        folder.mkdir()
        for f in range(50):
            (folder / f"file{f}.{'md' if f % 2 else 'py'}").write_text("x\n")
        (folder / "skip.log").write_text("x\n")


def build_loops(root: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "x.md").write_text("x\n")
    (root / "d" / "self").symlink_to(root / "d", target_is_directory=True)
    (root / "d" / "up").symlink_to(root, target_is_directory=True)
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    small = statistics.median(chunk_seconds(200) for _ in range(args.repeat))
    big = statistics.median(chunk_seconds(2000) for _ in range(args.repeat))
    print(f"chunking: 200 paragraphs {small:.3f} s, 2,000 paragraphs {big:.3f} s, ratio {big / small:.1f}x "
          "(linear: ~10x; old test bound 2.0 s)")
    with tempfile.TemporaryDirectory() as tmp:
        tree, loops = Path(tmp) / "tree", Path(tmp) / "loops"
        tree.mkdir()
        loops.mkdir()
        build_tree(tree)
        build_loops(loops)
        runs = [scan_seconds(tree) for _ in range(args.repeat)]
        loop_runs = [scan_seconds(loops)[0] for _ in range(args.repeat)]
    scan = statistics.median(s for s, _ in runs)
    print(f"scan: {runs[0][1]} files in {scan:.3f} s ({scan / runs[0][1] * 1e6:.0f} us/file; old test bound 0.5 s)")
    print(f"scan with symlink loops: {statistics.median(loop_runs):.4f} s (old test bound 5 s)")


if __name__ == "__main__":
    main()
