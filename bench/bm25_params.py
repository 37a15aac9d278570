"""BM25's k1 and b as levers, per half of a query set: nDCG@10 of a BM25 over the chunks a collection holds (the
FAISS sidecar's payloads, as bench/retrieval_quality.py indexed them), with the product's lexical terms
(indexer.search.lexical.terms: Snowball stems, stopwords out) and the title counted twice, for a grid of (k1, b).

Neither store can take other values today (the FAISS store's lexical index is SQLite FTS5, whose bm25() fixes
k1 = 1.2 and b = 0.75; the Qdrant stores' sparse weights use the same two constants), so this says whether
making them settings would pay, not what a user can change.

    python bench/bm25_params.py BEIR_DIR DATA_DIR [--collection beir] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retrieval_quality import K_EVAL, docs_of, load_beir, score, split_of  # noqa: E402

from indexer.models.native import machine_line  # noqa: E402
from indexer.search import lexical  # noqa: E402

K1S = (0.6, 0.9, 1.2, 1.5, 2.0)
BS = (0.3, 0.5, 0.75, 0.9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("beir_dir", type=Path)
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--collection", default="beir")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    print(machine_line(), file=sys.stderr, flush=True)  # every figure names its CPU (stdout: the JSON)
    _, queries, qrels = load_beir(args.beir_dir)
    qids = sorted(queries)
    splits = {"all": qids, "tune": [q for q in qids if split_of(q) == "tune"],
              "held-out": [q for q in qids if split_of(q) == "held-out"]}  # fmt: skip
    sidecar = next((args.data_dir / "faiss").glob(f"{args.collection}/**/*.sqlite"))
    db = sqlite3.connect(f"file:{sidecar}?mode=ro", uri=True)
    paths, postings, lengths = [], {}, []
    for i, (payload,) in enumerate(db.execute("SELECT payload FROM points ORDER BY iid")):
        p = json.loads(payload)
        paths.append(str(p.get("path")))
        words = lexical.terms(" ".join(p.get("heading") or [])) * 2 + lexical.terms(str(p.get("text", "")))
        lengths.append(len(words))
        for term, tf in Counter(words).items():
            postings.setdefault(term, ([], []))
            postings[term][0].append(i)
            postings[term][1].append(tf)
    n = len(paths)
    dl = np.asarray(lengths, dtype=np.float64)
    avg = float(dl.mean()) if n else 1.0
    index = {t: (np.asarray(d), np.asarray(f, dtype=np.float64)) for t, (d, f) in postings.items()}
    idf = {t: math.log(1 + (n - len(d) + 0.5) / (len(d) + 0.5)) for t, (d, _) in index.items()}
    qterms = {q: [t for t in dict.fromkeys(lexical.terms(queries[q])) if t in index] for q in qids}
    rows = []
    for k1 in K1S:
        for b in BS:
            norm = k1 * (1 - b + b * dl / avg)
            runs = {}
            for q in qids:
                scores = np.zeros(n)
                for t in qterms[q]:
                    docs, tf = index[t]
                    scores[docs] += idf[t] * tf * (k1 + 1) / (tf + norm[docs])
                top = np.argsort(-scores)[: K_EVAL * 2]
                runs[q] = docs_of(paths[i] for i in top if scores[i] > 0)
            row = {"k1": k1, "b": b, **{s: round(score(runs, qrels, sub)[0], 4) for s, sub in splits.items()}}
            rows.append(row)
            print(row, file=sys.stderr)
    out = {"chunks": n, "queries": {s: len(v) for s, v in splits.items()}, "grid": rows}
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
