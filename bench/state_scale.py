"""The state store at 100,000 files: first index, no-change re-run, status, and one edited file.

Files are tiny and mostly share their text (so the run measures the state store, the scan and the store writes,
not the embedding model: identical chunk texts are embedded once and then come from the vector cache). The
reference is a bare ``os.scandir`` + ``stat`` walk of the same tree in the same run: the floor any re-run
must pay to notice changes.

    python bench/state_scale.py --files 100000 --work /tmp/state-scale
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def write_tree(root: Path, n: int) -> None:
    per_dir = 100
    for i in range(n):
        d = root / f"d{i // per_dir:05d}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"note{i:06d}.md").write_text(f"# Note\n\nShared text about backups and key rotation, group {i % 50}.\n")


def stat_walk(root: Path) -> int:
    count = 0
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    entry.stat()
                    count += 1
    return count


def timed(label: str, fn):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t
    print(f"{label}: {seconds:.2f} s", flush=True)
    return out, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="state-scale-"))
    os.environ["INDEXER_DATA_DIR"] = str(work / "data")
    os.environ["INDEXER_CONFIG"] = str(work / "no-config.toml")
    import indexer

    root = work / "tree"
    if not root.exists():
        timed(f"write {args.files:,} files", lambda: write_tree(root, args.files))
    _, walk = timed("reference: scandir + stat walk", lambda: stat_walk(root))
    with indexer.open_collection("scale") as col:
        report, _ = timed("first index", lambda: col.index([root]))
        print(f"  {report.files_indexed:,} files, {report.chunks_embedded} chunks embedded, "
              f"{report.chunks_reused:,} reused")
    with indexer.open_collection("scale") as col:
        report, rerun = timed("no-change re-run (new process state: fresh collection object)", col.sync)
        assert report.files_indexed == 0 and report.files_unchanged == args.files, report
        _, _ = timed("status", col.status)
        edited = root / "d00000" / "note000000.md"
        edited.write_text("# Note\n\nAn edited note about penguins.\n")
        report, _ = timed("one edited file (full re-sync)", col.sync)
        assert report.files_indexed == 1, report
        edited.write_text("# Note\n\nEdited again: penguins and puffins.\n")
        report, _ = timed("one edited file (sync_paths, as the watcher does)", lambda: col.sync_paths([edited]))
        assert report.files_indexed == 1, report
    print(f"no-change re-run / bare stat walk: {rerun / walk:.1f}x")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
