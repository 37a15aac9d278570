"""The multilingual sets through the product: dense, lexical and hybrid nDCG@10 per language with the defaults.

Each set of bench/multilingual_lexical.py (its cached man-page sets, and the hand-written ones) is written as one
Markdown file per document (``# title``, blank line, text), indexed with the Collection API (default model and
store, 128-token chunks) into ``--data-dir``, and every query searched in each mode through
``Collection.search``; documents are ranked by their best chunk. Run it from two checkouts (before/after an
analyzer change) with separate data dirs: the vectors are the same, only the lexical side differs.

Usage:
  python bench/multilingual_product.py --data-dir DIR [--langs zh_CN,ja,...] [--docs 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import indexer

SETS = Path("/tmp/indexer-multilingual-sets")
HAND = Path(__file__).resolve().parent / "multilingual_handwritten.json"


def _sets(langs: list[str], docs: int) -> dict[str, list[dict[str, str]]]:
    hand = json.loads(HAND.read_text(encoding="utf-8"))
    out = {}
    for lang in langs:
        rows = hand[lang] if lang in hand else json.loads((SETS / f"{lang}-600-2000.json").read_text("utf-8"))
        out[lang] = rows[:docs]
    return out


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--langs", default="zh_CN,ja,ko-hand,th-hand,hi-hand,ar-hand")
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results: dict[str, dict[str, float]] = {}
    for lang, rows in _sets(args.langs.split(","), args.docs).items():
        folder = args.data_dir / "corpus" / lang
        folder.mkdir(parents=True, exist_ok=True)
        for r in rows:
            (folder / f"{r['id'].replace('/', '_')}.md").write_text(f"# {r['title']}\n\n{r['text']}\n", "utf-8")
        name = "ml-" + lang.replace("_", "-").lower()
        t0 = time.perf_counter()
        with indexer.open_collection(name, data_dir=args.data_dir.resolve()) as col:
            col.index([folder.resolve()])
            indexed = time.perf_counter() - t0
            found: dict[str, float] = {}
            for mode in ("dense", "lexical", "hybrid"):
                gains = []
                for r in rows:
                    hits = col.search(r["query"], k=10, candidates=50, mode=mode, rerank=False).hits
                    ranked = list(dict.fromkeys(Path(h.path).stem for h in hits))[:10]
                    want = r["id"].replace("/", "_")
                    gains.append(1 / math.log2(ranked.index(want) + 2) if want in ranked else 0.0)
                found[mode] = sum(gains) / len(gains)
        results[lang] = {**found, "queries": len(rows), "index_s": indexed}
        print(f"{lang:8} {len(rows):4} queries  " + "  ".join(f"{m} {found[m]:.4f}" for m in found), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
