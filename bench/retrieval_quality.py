"""Retrieval quality through the product on a BEIR data set (e.g. SciFact): nDCG@10 and recall@100.

The corpus is written as one Markdown file per document (``<_id>.md``: ``# title``, blank line, text) and indexed
with the Collection API into ``--data-dir`` (kept, so later runs reuse the index: indexing SciFact costs several
CPU minutes). Every query is then searched in each mode through ``Collection.search`` (the product's path), and
documents are ranked by their best chunk.

Held-out evaluation: the queries are split in two halves by a hash of their id. Levers (fusion method and
weight, candidate depth, per-document aggregation) are tuned on the ``tune`` half only; the chosen setting is
reported on the ``held-out`` half too, next to the product's defaults. The lexical side's tokenizer levers
(stemming, stopwords, title weight) are measured with SQLite FTS5 on the same chunk texts.

Usage:
  python bench/retrieval_quality.py BEIR_DIR [--data-dir DIR] [--store faiss|qdrant] [--rerank-model GGUF]
                                    [--limit-queries N] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import indexer
from indexer.ops import metrics
from indexer.search import lexical
from indexer.search.fusion import FusionConfig, fuse
from indexer.search.query import fit_query
from indexer.types import Hit

DEPTH = 200  # chunks fetched per side for the offline fusion grid
K_EVAL = 100


def load_beir(root: Path) -> tuple[list[dict[str, str]], dict[str, str], dict[str, set[str]]]:
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    queries = {}
    for line in (root / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line:
            q = json.loads(line)
            queries[str(q["_id"])] = str(q["text"])
    qrels: dict[str, set[str]] = {}
    for i, line in enumerate((root / "qrels.tsv").read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if i == 0 and not parts[-1].strip().isdigit():
            continue
        if len(parts) >= 3 and int(parts[2]) > 0:
            qrels.setdefault(parts[0], set()).add(parts[1])
    return corpus, {q: t for q, t in queries.items() if q in qrels}, qrels


def write_corpus(corpus: Sequence[dict[str, str]], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for doc in corpus:
        path = folder / f"{doc['_id']}.md"
        title = " ".join(str(doc.get("title") or "").split())
        body = str(doc.get("text") or "")
        text = (f"# {title}\n\n{body}\n" if title else f"{body}\n")
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def doc_id(hit_path: str) -> str:
    return Path(hit_path).stem


def ndcg_at(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """nDCG@k as `indexer eval` computes it (indexer.ops.metrics; SciFact's qrels are all grade 1)."""
    return metrics.ndcg_at(ranked, dict.fromkeys(relevant, 1.0), k)


def recall_at(ranked: Sequence[str], relevant: set[str], k: int = K_EVAL) -> float:
    return metrics.recall_at(ranked, dict.fromkeys(relevant, 1.0), k)


def docs_of(paths: Iterable[str]) -> list[str]:
    """Document ranking from chunk hits: each document at the rank of its best chunk."""
    return list(dict.fromkeys(doc_id(p) for p in paths))


def split_of(qid: str) -> str:
    return "tune" if hashlib.sha256(qid.encode()).digest()[0] % 2 == 0 else "held-out"


def score(runs: dict[str, list[str]], qrels: dict[str, set[str]], qids: Sequence[str]) -> tuple[float, float]:
    if not qids:
        return 0.0, 0.0
    nd = sum(ndcg_at(runs[q], qrels[q]) for q in qids) / len(qids)
    rc = sum(recall_at(runs[q], qrels[q]) for q in qids) / len(qids)
    return nd, rc


def aggregate_files(hits: Sequence[Hit]) -> list[Hit]:
    """One hit per file (its best chunk's score), keyed by the path so both sides fuse per file."""
    seen: dict[str, Hit] = {}
    for h in hits:
        path = str(h.payload.get("path"))
        if path not in seen:
            seen[path] = Hit(id=path, score=h.score, payload=h.payload)
    return list(seen.values())


def main() -> int:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("beir_dir", type=Path)
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/indexer-beir"), help="kept between runs")
    ap.add_argument("--collection", default="beir")
    ap.add_argument("--store", default="faiss", choices=["faiss", "qdrant"])
    ap.add_argument("--rerank-model", default=None)
    ap.add_argument("--limit-queries", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--levers", action=argparse.BooleanOptionalAction, default=True,
                    help="the offline fusion grid and FTS5 tokenizer levers (--no-levers: the product's figures only)")
    ap.add_argument("--heading-lever", action=argparse.BooleanOptionalAction, default=True,
                    help="re-embed every chunk that does not start with its heading with the heading in front "
                    "(FAISS only; exact search over the sidecar's vectors)")
    ap.add_argument(
        "--no-index",
        action="store_true",
        help="evaluate the collection as it is (e.g. while another process indexes): the corpus is then the "
        "documents indexed so far and the queries those with a relevant document among them",
    )
    args = ap.parse_args()

    corpus, queries, qrels = load_beir(args.beir_dir)
    if args.no_index:
        indexed = _indexed_docs(args.data_dir.resolve(), args.collection)
        corpus = [d for d in corpus if str(d["_id"]) in indexed]
        qrels = {q: rel & indexed for q, rel in qrels.items() if rel & indexed}
        queries = {q: t for q, t in queries.items() if q in qrels}
    qids = sorted(queries)
    if args.limit_queries:
        qids = qids[: args.limit_queries]
    splits = {"all": qids, "tune": [q for q in qids if split_of(q) == "tune"]}
    splits["held-out"] = [q for q in qids if split_of(q) == "held-out"]
    data_dir = args.data_dir.resolve()
    corpus_dir = data_dir / "corpus"
    if not args.no_index:
        write_corpus(corpus, corpus_dir)
    results: dict[str, object] = {"documents": len(corpus), "queries": {k: len(v) for k, v in splits.items()}}

    with indexer.open_collection(
        args.collection, data_dir=data_dir, store=args.store, max_top_k=400, max_candidates=400
    ) as col:
        if not args.no_index:
            t0 = time.perf_counter()
            report = col.index([corpus_dir])
            results["index"] = {
                "seconds": round(time.perf_counter() - t0, 1),
                "embedded": report.chunks_embedded,
                "reused": report.chunks_reused,
            }
            print(f"indexed: {results['index']}", file=sys.stderr)
        results["chunks"] = col.state.counts(col.name)["chunks"]

        # 1. Each query once: its dense and lexical rankings from the store, DEPTH deep (one embedding per query).
        store, embedder, norm = col.store, col.embedder, col.record.normalization  # type: ignore[union-attr]
        dense_lists: dict[str, list[Hit]] = {}
        lex_lists: dict[str, list[Hit]] = {}
        query_vectors: dict[str, object] = {}
        timing = {"dense": 0.0, "lexical": 0.0}
        for q in qids:
            t0 = time.perf_counter()
            vec = embedder.embed_batch([fit_query(queries[q], embedder)], norm)[0]
            query_vectors[q] = vec
            dense_lists[q] = store.search(col.name, vec, DEPTH)
            t1 = time.perf_counter()
            lex_lists[q] = store.search_lexical(col.name, queries[q], DEPTH)  # type: ignore[attr-defined]
            timing["dense"] += t1 - t0
            timing["lexical"] += time.perf_counter() - t1

        # 2. The three modes as the product runs them with its defaults (fusion.fuse on each side's top
        # depth(K_EVAL * 2) = DEPTH chunks), checked against Collection.search on a sample of queries.
        config = col.reader.fusion_config()
        runs_by_mode = {
            "dense": {q: docs_of(str(h.payload["path"]) for h in dense_lists[q]) for q in qids},
            "lexical": {q: docs_of(str(h.payload["path"]) for h in lex_lists[q]) for q in qids},
            "hybrid": {
                q: docs_of(str(h.payload["path"]) for h in fuse(dense_lists[q], lex_lists[q], config)) for q in qids
            },
        }
        same, checked = 0, 0
        for q in qids[:: max(1, len(qids) // 20)]:
            for mode, runs in runs_by_mode.items():
                res = col.search(queries[q], k=10, candidates=K_EVAL, mode=mode, rerank=False)
                got = docs_of(h.path for h in res.hits)
                checked += 1
                same += got == runs[q][: len(got)]
        results["collection_search_agrees"] = f"{same}/{checked} sampled (query, mode) top-10 rankings"
        print("Collection.search agrees:", results["collection_search_agrees"], file=sys.stderr)
        table: dict[str, dict[str, float]] = {}
        for mode, runs in runs_by_mode.items():
            for name, sub in splits.items():
                nd, rc = score(runs, qrels, sub)
                table[f"{mode} ({name})"] = {"ndcg@10": round(nd, 4), "recall@100": round(rc, 4)}
        table["dense (all)"]["ms_per_query"] = round(timing["dense"] * 1000 / max(1, len(qids)), 1)
        table["lexical (all)"]["ms_per_query"] = round(timing["lexical"] * 1000 / max(1, len(qids)), 1)
        results["product"] = table
        results["defaults"] = {"fusion": config.method, "dense_weight": config.dense_weight}
        print(json.dumps(table), file=sys.stderr)

        if hasattr(store, "builder"):  # embedded Qdrant (qdrant-edge): its own prefetch + fusion, same two sides
            engine = engine_fusion(store, col.name, query_vectors, queries, qids, qrels, splits)
            results["engine_fusion"] = engine
            print("in-engine fusion:", json.dumps(engine), file=sys.stderr)

        # The same figures through `indexer eval`'s code (Collection.search, files at their best chunk's rank).
        results["indexer_eval"] = eval_run(col, args.beir_dir, corpus_dir, qids)
        print("indexer eval:", json.dumps(results["indexer_eval"]), file=sys.stderr)
        if not args.levers:
            text = json.dumps(results, indent=2)
            print(text)
            if args.json:
                args.json.write_text(text + "\n", encoding="utf-8")
            return 0

        grid = lever_grid(dense_lists, lex_lists, qrels, splits)
        results["levers"] = grid
        best = max(grid, key=lambda row: float(row["tune"]))  # type: ignore[arg-type]
        results["chosen_on_tune"] = best
        print("best on tune:", best, file=sys.stderr)

        # 3. Tokenizer levers of the lexical side (FTS5 over the same chunk payloads).
        results["tokenizer"] = tokenizer_levers(store, col.name, queries, qrels, splits)

        # 4. Index-time lever: each chunk embedded with its heading path (the document's title) in front.
        if args.heading_lever and getattr(store, "_require", None) is not None:
            results["heading_lever"] = heading_lever(store, col.name, embedder, norm, query_vectors, lex_lists,
                                                     config, qrels, splits)  # fmt: skip
            print("heading lever:", json.dumps(results["heading_lever"]), file=sys.stderr)

        # 4. Rerank over the fused candidates, when a reranker is given.
        if args.rerank_model:
            results["rerank"] = rerank_run(args, data_dir, queries, qrels, splits)

    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


def eval_run(col: object, beir_dir: Path, corpus_dir: Path, qids: Sequence[str]) -> dict[str, object]:
    """nDCG@10, recall@100 and MRR per mode as `indexer eval` computes them on this collection: with the
    collection's candidates (a default search: 100 chunks a side in hybrid) and with 100 candidates (200 a side,
    as the product figures above fuse)."""
    from indexer.ops import evaluate, qrels

    wanted = set(qids)
    loaded = [q for q in qrels.load(beir_dir, template="{id}.md") if q.qid in wanted]
    out: dict[str, object] = {}
    for label, candidates in (("default candidates", None), ("100 candidates", K_EVAL)):
        runs = evaluate.evaluate(loaded, evaluate.collection_search(col, 300, candidates),
                                 [(m, False) for m in evaluate.MODES], corpus_dir.resolve(), recall_k=K_EVAL)
        out[label] = [r.summary() for r in runs]
    return out


def engine_fusion(store: object, collection: str, vectors: dict[str, object], queries: dict[str, str],
                  qids: Sequence[str], qrels: dict[str, set[str]], splits: dict[str, list[str]]) -> dict[str, object]:
    """nDCG@10 / recall@100 of qdrant-edge's in-engine fusion (RRF, weighted RRF, DBSF) over the same dense and
    BM25 sides, DEPTH deep each, as our ``fuse`` gets them; and its time per query."""
    import numpy as np
    import qdrant_edge as qe

    from plugins.qdrant.edge import LEXICAL, hnsw_ef

    methods = {"rrf k=60": qe.Fusion.Rrf(k=60), "rrf k=2": qe.Fusion.Rrf(k=2),
               "rrf k=60 w=0.4/0.6": qe.Fusion.Rrf(k=60, weights=[0.4, 0.6]), "dbsf": qe.Fusion.Dbsf()}
    out: dict[str, object] = {}
    for name, method in methods.items():
        runs: dict[str, list[str]] = {}
        t0 = time.perf_counter()
        for q in qids:
            indices, values = lexical.sparse_query(queries[q])
            prefetch = [qe.Prefetch(limit=DEPTH, query=qe.Query.Nearest(np.asarray(vectors[q]).tolist()),
                                    params=qe.SearchParams(hnsw_ef=hnsw_ef(DEPTH)))]
            if indices:
                prefetch.append(qe.Prefetch(limit=DEPTH, query=qe.Query.Nearest(
                    qe.SparseVector(indices=indices, values=values), using=LEXICAL)))
            request = qe.QueryRequest(limit=K_EVAL * 2, prefetches=prefetch, query=method, with_payload=True)
            found = store._query(collection, request)  # type: ignore[attr-defined]
            runs[q] = docs_of(str((p.payload or {}).get("path")) for p in found)
        ms = (time.perf_counter() - t0) * 1000 / max(1, len(qids))
        out[name] = {split: dict(zip(("ndcg@10", "recall@100"), (round(v, 4) for v in score(runs, qrels, sub)),
                                     strict=True)) for split, sub in splits.items()}
        out[name]["ms_per_query"] = round(ms, 2)  # type: ignore[index]
    return out


def heading_lever(store: object, collection: str, embedder: object, norm: object, query_vectors: dict[str, object],
                  lex_lists: dict[str, list[Hit]], config: FusionConfig, qrels: dict[str, set[str]],
                  splits: dict[str, list[str]]) -> dict[str, object]:
    """Dense and hybrid nDCG@10 with the stored chunk vectors (exact search) and with every chunk that does not
    already open with its heading re-embedded as ``heading path + blank line + text`` (a contextual chunk
    header: the title of a SciFact abstract, a man page's command, a function's qualified name)."""
    import numpy as np

    coll = store._require(collection)  # type: ignore[attr-defined]
    rows = coll.sidecar.conn.execute("SELECT uuid, payload, vector FROM points").fetchall()
    ids = [r[0] for r in rows]
    payloads = [json.loads(r[1]) for r in rows]
    base = np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows])
    changed = [i for i, p in enumerate(payloads)
               if p.get("heading") and not str(p.get("text", "")).lstrip().startswith("#")]  # fmt: skip
    texts = [" > ".join(payloads[i]["heading"]) + "\n\n" + str(payloads[i]["text"]) for i in changed]
    t0 = time.perf_counter()
    alt = base.copy()
    for start in range(0, len(texts), 64):
        vecs = embedder.embed_batch(texts[start:start + 64], norm)  # type: ignore[attr-defined]
        alt[changed[start:start + 64]] = np.asarray(vecs, dtype=np.float32)
    out: dict[str, object] = {"chunks": len(ids), "re-embedded": len(changed),
                              "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    for label, matrix in (("stored vectors", base), ("heading in front", alt)):
        dense: dict[str, list[str]] = {}
        hybrid: dict[str, list[str]] = {}
        for q, vec in query_vectors.items():
            sims = matrix @ np.asarray(vec, dtype=np.float32)
            top = np.argsort(-sims)[:DEPTH]
            hits = [Hit(id=ids[i], score=float(sims[i]), payload=payloads[i]) for i in top]
            dense[q] = docs_of(str(h.payload.get("path")) for h in hits)
            hybrid[q] = docs_of(str(h.payload.get("path")) for h in fuse(hits, lex_lists[q], config))
        out[label] = {mode: {split: round(score(runs, qrels, sub)[0], 4) for split, sub in splits.items()}
                      for mode, runs in (("dense", dense), ("hybrid", hybrid))}  # fmt: skip
    return out


def _indexed_docs(data_dir: Path, collection: str) -> set[str]:
    db = sqlite3.connect(f"file:{data_dir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT path FROM files WHERE collection = ? AND status = 'indexed'", (collection,))
        return {doc_id(r[0]) for r in rows}
    finally:
        db.close()


def lever_grid(
    dense_lists: dict[str, list[Hit]],
    lex_lists: dict[str, list[Hit]],
    qrels: dict[str, set[str]],
    splits: dict[str, list[str]],
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    configs: list[tuple[str, FusionConfig, int, bool]] = []
    for method in ("rrf", "score", "dbsf"):
        for w in (0.3, 0.4, 0.5, 0.6, 0.7):
            for depth in (50, 100, 200):
                for per_file in (False, True):
                    configs.append((method, FusionConfig(method=method, dense_weight=w), depth, per_file))
    for method, config, depth, per_file in configs:
        runs: dict[str, list[str]] = {}
        for q in dense_lists:
            d, lx = dense_lists[q][:depth], lex_lists[q][:depth]
            if per_file:
                d, lx = aggregate_files(d), aggregate_files(lx)
            runs[q] = docs_of(str(h.payload.get("path")) for h in fuse(d, lx, config))
        row: dict[str, object] = {"fusion": method, "dense_weight": config.dense_weight, "depth": depth,
                                  "per_file": per_file}
        for name, sub in splits.items():
            row[name] = round(score(runs, qrels, sub)[0], 4)
        rows.append(row)
    return rows


def tokenizer_levers(
    store: object, collection: str, queries: dict[str, str], qrels: dict[str, set[str]], splits: dict[str, list[str]]
) -> list[dict[str, object]]:
    """BM25 (FTS5) with other tokenizers over the collection's chunk payloads: stemming, stopwords, title weight."""
    payloads = _all_payloads(store, collection)
    variants: list[tuple[str, Callable[[str], list[str]], float]] = [
        ("snowball + stopwords (product), title x2", lexical.terms, 2.0),
        ("snowball + stopwords, title x1", lexical.terms, 1.0),
        ("snowball + stopwords, title x3", lexical.terms, 3.0),
        ("no stemming, stopwords", _no_stem, 2.0),
        ("snowball, no stopwords", _no_stopwords, 2.0),
    ]
    rows = []
    for name, tok, title_w in variants:
        db = sqlite3.connect(":memory:")
        db.execute(
            "CREATE VIRTUAL TABLE t USING fts5(path UNINDEXED, title, body, tokenize=\"unicode61 tokenchars '_'\")"
        )
        for p in payloads:
            heading = " ".join(p.get("heading") or [])
            db.execute("INSERT INTO t VALUES (?, ?, ?)", (p["path"], " ".join(tok(heading)), " ".join(tok(p["text"]))))
        runs: dict[str, list[str]] = {}
        for q in splits["all"]:
            words = list(dict.fromkeys(tok(queries[q])))
            if not words:
                runs[q] = []
                continue
            match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            cur = db.execute(
                "SELECT path FROM t WHERE t MATCH ? ORDER BY bm25(t, 0, ?, 1.0) LIMIT ?", (match, title_w, K_EVAL * 2)
            )
            runs[q] = docs_of(r[0] for r in cur)
        row: dict[str, object] = {"tokenizer": name}
        for split, sub in splits.items():
            row[split] = round(score(runs, qrels, sub)[0], 4)
        rows.append(row)
        print("tokenizer", row, file=sys.stderr)
    return rows


def _no_stem(text: str) -> list[str]:
    return [w.casefold() for w in lexical._WORD.findall(text) if w.casefold() not in lexical.STOPWORDS]


def _no_stopwords(text: str) -> list[str]:
    words = [w.casefold() for w in lexical._WORD.findall(text)]
    return list(lexical._stemmer().stemWords(words)) if words else []


def _all_payloads(store: object, collection: str) -> list[dict[str, object]]:
    if hasattr(store, "builder"):  # embedded Qdrant (qdrant-edge): its pages
        return [dict(r.payload or {}) for page in store._pages(collection, with_payload=True,  # type: ignore[attr-defined]
                                                               with_vector=False) for r in page]
    if getattr(store, "_require", None) is not None:  # FAISS: read the sidecar directly
        coll = store._require(collection)  # type: ignore[attr-defined]
        return [json.loads(r[1]) for r in coll.sidecar.conn.execute("SELECT iid, payload FROM points")]
    client = store.client  # type: ignore[attr-defined]
    out, offset = [], None
    while True:
        records, offset = client.scroll(collection, limit=512, offset=offset, with_payload=True)
        out += [dict(r.payload) for r in records]
        if offset is None:
            return out


def rerank_run(
    args: argparse.Namespace, data_dir: Path, queries: dict[str, str], qrels: dict[str, set[str]],
    splits: dict[str, list[str]],
) -> dict[str, object]:
    out: dict[str, object] = {}
    with indexer.open_collection(args.collection, data_dir=data_dir, rerank_model=args.rerank_model) as col:
        for mode in ("dense", "hybrid"):
            runs = {}
            for q in splits["all"]:
                res = col.search(queries[q], k=10, candidates=30, mode=mode, rerank=True)
                runs[q] = docs_of(h.path for h in res.hits)
            out[mode] = {name: round(score(runs, qrels, sub)[0], 4) for name, sub in splits.items()}
    return out


if __name__ == "__main__":
    sys.exit(main())
