"""End-to-end indexing benchmark on a real corpus: Python sources installed on this machine (stdlib first), or a
BEIR corpus (``--beir corpus.jsonl``: one Markdown file per document, ``# title`` and text, e.g. SciFact train).

Measures, in one process and on the same chunks:
  * LlamaEmbedding alone (embed-only reference) vs the whole pipeline (scan, read, chunk, embed, write): tokens/s
    and their ratio (goal: pipeline >= 90% of embed-only);
  * a no-change re-run (goal: < 1 s for 2,000 files);
  * one edited file (goal: well under 1 s plus that file's embedding);
  * search p50/p95 without rerank, with rerank of 20 candidates, and the default search with a reranker (its
    latency budget, ``rerank_budget_ms``) with how many candidates it reranked (test reranker fixture);
  * the reranker's pair throughput (tokens/s over query+document pairs) next to embedding tokens/s.

Usage: python bench/index_throughput.py [--files 2000] [--tokens 1000000] [--beir corpus.jsonl] [--store faiss]
       [--keep DATA_DIR] [--out results.json]
(``--keep`` leaves the data directory in place: its state.sqlite holds the chunk vectors bench/scale.py uses.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

import indexer
from indexer.core.normalization import Normalization
from indexer.engine.adapters import LlamaEmbedder
from indexer.index.chunking import chunker_for
from indexer.models import ensure_model
from plugins.filesystem import FilesystemSource

RERANKER = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "models" / "test-reranker-q8_0.gguf"


def build_corpus(dest: Path, max_files: int, max_tokens: int) -> tuple[int, int]:
    """Copy .py files of 300 B - 5 KB (standard library first, then installed packages) until max_files or ~max_tokens
    (bytes/4 estimate). The stdlib alone has too few files of that size for 2,000 files and ~1M tokens."""
    paths = sysconfig.get_paths()
    stdlib, purelib = Path(paths["stdlib"]), Path(paths["purelib"])
    candidates = [(stdlib, p) for p in sorted(stdlib.rglob("*.py")) if "site-packages" not in p.parts]
    candidates += [(purelib, p) for p in sorted(purelib.rglob("*.py"))]
    n, est = 0, 0
    for base, src in candidates:
        size = src.stat().st_size
        if not 300 <= size <= 5000:
            continue
        target = dest / base.name / src.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        n, est = n + 1, est + size // 4
        if n >= max_files or est >= max_tokens:
            break
    return n, est


def beir_corpus(dest: Path, corpus: Path, max_files: int) -> tuple[int, int]:
    """One Markdown file per BEIR document (``# title``, blank line, text), named by its id."""
    n, est = 0, 0
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            doc = json.loads(line)
            title = " ".join(str(doc.get("title") or "").split())  # as bench/retrieval_quality.py writes it, so
            body = str(doc.get("text") or "")                        # its runs reuse these chunks' vectors
            text = f"# {title}\n\n{body}\n" if title else f"{body}\n"
            target = dest / f"{doc['_id']}.md"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            n, est = n + 1, est + len(text) // 4
            if n >= max_files:
                break
    return n, est


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--store", default="faiss")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--beir", type=Path, help="a BEIR corpus.jsonl to index instead of Python sources")
    ap.add_argument("--keep", type=Path, help="data directory to index into and keep (default: a temporary one)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="indexer-bench-"))
    corpus = work / "corpus"
    if args.beir:
        n_files, est = beir_corpus(corpus, args.beir, args.files if args.files != 2000 else 10**9)
    else:
        n_files, est = build_corpus(corpus, args.files, args.tokens)
    print(f"corpus: {n_files} files, ~{est:,} tokens (estimate) in {corpus}")
    model = ensure_model()
    results: dict[str, object] = {"files": n_files}

    # 1. embed-only reference on exactly the chunks the pipeline will produce
    embedder = LlamaEmbedder(model)
    data_dir = args.keep or work / "data"
    if args.keep and args.keep.exists():
        shutil.rmtree(args.keep)  # from an empty collection
    os.environ["INDEXER_DATA_DIR"] = str(data_dir)
    with indexer.open_collection("bench", store=args.store) as col:  # the chunk size a new collection gets
        chunk_tokens, overlap = col.parts._new_chunk_tokens(), col.settings.chunk_overlap  # before it is created
    chunker = chunker_for(embedder, chunk_tokens, overlap)  # so both sides embed the same chunks
    source = FilesystemSource([corpus])
    texts: list[str] = []
    for ref in source.scan():
        with contextlib.suppress(indexer.IndexerError):
            texts.extend(c.text for c in chunker.chunk(source.read(ref)))
    unique = list(dict.fromkeys(texts))
    tokens = sum(embedder.count_tokens(t) for t in unique)
    t0 = time.perf_counter()
    for i in range(0, len(unique), 256):
        embedder.embed_batch(unique[i : i + 256], Normalization.L2)
    embed_only = time.perf_counter() - t0
    embedder.close()
    results["chunks"] = len(unique)
    results["tokens"] = tokens
    results["embed_only_tokens_per_s"] = tokens / embed_only
    rate = tokens / embed_only
    print(f"embed-only: {len(unique)} chunks, {tokens:,} tokens in {embed_only:.1f}s = {rate:,.0f} tok/s")

    # 2. full pipeline, fresh data dir
    with indexer.open_collection("bench", store=args.store) as col:
        t0 = time.perf_counter()
        report = col.index([corpus])
        full = time.perf_counter() - t0
        assert not report.failed or len(report.failed) < n_files // 50, report.failed[:5]
        rate = report.tokens_embedded / full
        results["pipeline_tokens_per_s"] = rate
        results["pipeline_vs_embed_only"] = rate / results["embed_only_tokens_per_s"]  # type: ignore[operator]
        print(
            f"pipeline: {report.files_indexed} files, {report.chunks_embedded} chunks, {report.tokens_embedded:,} "
            f"tokens in {full:.1f}s = {rate:,.0f} tok/s ({results['pipeline_vs_embed_only']:.0%} of embed-only)"
        )

        # 3. no-change re-run (twice: the first may re-hash files younger than the racy window)
        col.index([corpus])
        t0 = time.perf_counter()
        again = col.index([corpus])
        results["nochange_rerun_s"] = time.perf_counter() - t0
        assert again.files_indexed == 0 and again.chunks_embedded == 0
        print(f"no-change re-run of {again.files_seen} files: {results['nochange_rerun_s']:.3f}s")

        # 4. one edited file
        files = sorted(p for p in corpus.rglob("*") if p.is_file())
        victim = files[len(files) // 2]
        victim.write_text(victim.read_text() + "\n\ndef added_function():\n    return 'a new chunk of text'\n")
        t0 = time.perf_counter()
        edit = col.index([corpus])
        results["one_edit_s"] = time.perf_counter() - t0
        results["one_edit_embed_s"] = edit.embed_seconds
        print(
            f"one edited file: {results['one_edit_s']:.3f}s total, {edit.embed_seconds:.3f}s of it embedding "
            f"({edit.chunks_embedded} new chunks, {edit.chunks_reused} reused)"
        )

        # 5. search latency
        rng = random.Random(0)
        queries = [" ".join(t.split()[:8]) for t in rng.sample(unique, min(args.queries, len(unique)))]
        col.search("warm up")
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            col.search(q, k=10, candidates=50, rerank=False)
            lat.append((time.perf_counter() - t0) * 1000)
        results["search_p50_ms"], results["search_p95_ms"] = pct(lat, 0.5), pct(lat, 0.95)
        print(f"search (50 candidates, no rerank): p50 {pct(lat, 0.5):.1f} ms, p95 {pct(lat, 0.95):.1f} ms")
    if RERANKER.exists():
        with indexer.open_collection("bench", rerank_model=str(RERANKER)) as col:
            col.search("warm up", candidates=20)
            lat = []
            for q in queries:
                t0 = time.perf_counter()
                col.search(q, k=10, candidates=20)
                lat.append((time.perf_counter() - t0) * 1000)
            results["rerank20_p50_ms"], results["rerank20_p95_ms"] = pct(lat, 0.5), pct(lat, 0.95)
            print(f"search + rerank of 20 candidates: p50 {pct(lat, 0.5):.1f} ms, p95 {pct(lat, 0.95):.1f} ms")
            print(f"  (mean {statistics.mean(lat):.1f} ms)")
            lat, counts = [], []
            for q in queries:  # the default: the rerank stage sized by its latency budget
                t0 = time.perf_counter()
                result = col.search(q, k=10)
                lat.append((time.perf_counter() - t0) * 1000)
                counts.append(result.rerank_count)
        budget = col.settings.rerank_budget_ms
        results["default_rerank_p50_ms"], results["default_rerank_p95_ms"] = pct(lat, 0.5), pct(lat, 0.95)
        results["default_rerank_count_median"] = statistics.median(counts)
        print(f"default search with a reranker (rerank_budget_ms={budget}): p50 {pct(lat, 0.5):.0f} ms, "
              f"p95 {pct(lat, 0.95):.0f} ms, reranked {min(counts)}-{max(counts)} candidates "
              f"(median {statistics.median(counts):.0f})")
        pair_rate = rerank_pair_rate(RERANKER, queries, unique)
        results["rerank_pair_tokens_per_s"] = pair_rate
        print(f"reranker pairs: {pair_rate:,.0f} tok/s ({pair_rate / results['embed_only_tokens_per_s']:.2f}x "  # type: ignore[operator]
              "embedding tokens/s)")
    else:
        print("rerank: skipped (tests/fixtures/models/test-reranker-q8_0.gguf not present)")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)


def rerank_pair_rate(model: Path, queries: list[str], texts: list[str], pairs: int = 400) -> float:
    """Tokens/s of the reranker over (query, chunk) pairs, counted as the sequences it decodes."""
    from indexer.engine.llama_embedding import LlamaEmbedding

    ranker = LlamaEmbedding(str(model), verbose=False)
    try:
        rng = random.Random(1)
        work = [(q, rng.sample(texts, min(len(texts), max(1, pairs // len(queries))))) for q in queries]
        tokens = sum(len(s) for q, docs in work for s in ranker.rank_sequences(q, docs))
        ranker.rank(work[0][0], work[0][1][:4])  # warm up
        t0 = time.perf_counter()
        for q, docs in work:
            ranker.rank(q, docs)
        return tokens / (time.perf_counter() - t0)
    finally:
        ranker.close()


if __name__ == "__main__":
    main()
