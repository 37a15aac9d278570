"""FAISS IVF-SQ8 levers at scale, on the raw index (one query at a time): the list count, ``nprobe``, the float
rescoring depth and a second OpenMP thread over one query's lists, each against exact search in the same run.

The vectors are one of bench/scale.py's sets around the real chunk embeddings of an indexer state database. What
it answers (docs/benchmarks.md#recall-session-4): whether more lists buy recall per millisecond (on the versions
set they do: 4,096 lists at 1M twice as fast as 2,048 at the same recall; on boilerplate the recall follows the
vectors scanned, whatever the list count), whether a second thread shortens one query (it did not here), and
whether codes of fewer bytes scan faster for the same recall (``--codes``: FAISS factory code strings, e.g. SQ4, SQ6,
PQ96x4fs, RaBitQ4, RaBitQfs (FAISS >= 1.13; ``RaBitQ2@qb4`` sets the query's bits), or a transform before the
lists as ``PCAR192>SQ8``; on boilerplate
none of SQ4, SQ6, PCA or PQ did; RaBitQ did, by 20-30 %, docs/benchmarks.md#recall-session-6), and ``store:int8`` /
``store:sq8``: the store's own index (:class:`plugins.faiss.index.VectorIndex`, trained on its 40-per-list sample,
queried through its search, int8 queries included) with those codes (docs/benchmarks.md#int8-codes).

    python bench/ivf_levers.py --state DATA/state.sqlite --queries scifact/queries.jsonl --vectors versions \\
        --n 1000000 --lists 2048:405000,4096:524288 --nprobe 32 64 128 --depth 1 2
    python bench/ivf_levers.py ... --vectors boilerplate --lists 4096:524288 --codes SQ8 SQ4 SQ6 "PCAR192>SQ8" \
        --nprobe 256 512 --depth 1 4
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import scale  # noqa: E402  (bench/scale.py: the vector sets)

from indexer.models.native import machine_line  # noqa: E402
from plugins.faiss.index import AutoParams, HnswParams, VectorIndex  # noqa: E402


def recall_at_10(found: list[np.ndarray], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f[:10].tolist()) & set(t.tolist())) / 10 for f, t in zip(found, truth, strict=True)]))


def data_options(ap: argparse.ArgumentParser, vectors: str) -> None:
    """The options :func:`load_set` reads (shared by the IVF bench scripts); ``vectors``: the default set."""
    ap.add_argument("--state", type=Path, required=True, help="state.sqlite whose vector cache holds real chunks")
    ap.add_argument("--queries", type=Path, required=True,
                    help="BEIR queries.jsonl (embedded by the default model) or query vectors (.npy, normalized)")
    ap.add_argument("--vectors", choices=["scifact", "mailbox", "versions", "boilerplate"], default=vectors)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--max-queries", type=int, default=400)


def load_set(state: Path, queries_path: Path, vectors: str, n: int, max_queries: int) -> tuple[np.ndarray, ...]:
    """(real chunk vectors, queries, the set of ``n`` vectors around them, each query's exact top 10)."""
    real, _ = scale.real_vectors(state)
    if queries_path.suffix == ".jsonl":
        queries = scale.embed_queries(queries_path, max_queries)[0]
    else:
        queries = np.load(queries_path)[:max_queries].astype(np.float32)
    sets = {"scifact": scale.generated, "mailbox": scale.mailbox, "versions": scale.versions,
            "boilerplate": scale.boilerplate}
    data = sets[vectors](real, n)
    faiss.omp_set_num_threads(2)
    exact = faiss.IndexFlatIP(data.shape[1])
    exact.add(data)
    _, truth = exact.search(queries, 10)
    return real, queries, data, truth


def main() -> None:
    print(machine_line(), flush=True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data_options(ap, "versions")
    ap.add_argument("--lists", default="2048:405000,4096:524288",
                    help="LISTS:TRAINED_ON pairs: each trained on the first TRAINED_ON vectors, as the store does")
    ap.add_argument("--nprobe", type=int, nargs="+", default=[32, 64, 128])
    ap.add_argument("--depth", type=int, nargs="+", default=[1, 2], help="rescoring depth: depth x 10 rescored")
    ap.add_argument("--threads", action="store_true", help="also one query on two threads (parallel_mode 1)")
    ap.add_argument("--codes", nargs="+", default=["SQ8"],
                    help="codes of the lists (FAISS factory strings); TRANSFORM>CODES puts a transform first")
    ap.add_argument("--refine", choices=["float", "int8"], default="float",
                    help="rescore the depth's candidates with the float vectors, or with int8 copies held in RAM "
                         "(one scale) and then the best 2 x 10 of those with the floats, as a store keeping int8 "
                         "rows beside codes of fewer bytes would")
    args = ap.parse_args()

    real, queries, data, truth = load_set(args.state, args.queries, args.vectors, args.n, args.max_queries)
    print(f"{len(data):,} vectors ({args.vectors}), {len(queries)} queries", flush=True)
    rows = np.clip(np.rint(data * (127.0 / np.abs(data).max())), -128, 127).astype(np.int8) \
        if args.refine == "int8" else None
    space = faiss.ParameterSpace()
    for pair, codes in [(pair, codes) for pair in args.lists.split(",") for codes in args.codes]:
        lists, trained_on = (int(x) for x in pair.split(":"))
        if codes.startswith("store:"):
            store_codes(data, queries, truth, lists, codes.split(":", 1)[1], args.nprobe, args.depth)
            continue
        codes, _, qb = codes.partition("@qb")  # RaBitQ codes: "@qbN" sets the query's bits
        transform, _, code = codes.rpartition(">")
        spec = f"{transform + ',' if transform else ''}IVF{lists},{code}"
        index = faiss.index_factory(data.shape[1], spec, faiss.METRIC_INNER_PRODUCT)
        if qb:
            faiss.downcast_index(faiss.extract_index_ivf(index)).qb = int(qb)
            spec += f"@qb{qb}"
        faiss.omp_set_num_threads(2)
        t = time.perf_counter()
        index.train(data[: min(trained_on, len(data))])
        index.add(data)
        print(f"{spec} trained on {min(trained_on, len(data)):,}: {time.perf_counter() - t:.1f}s, "
              f"{faiss.serialize_index(index).nbytes / len(data):.0f} bytes/point", flush=True)
        modes = [(1, 0), (2, 1)] if args.threads else [(1, 0)]
        for nprobe in args.nprobe:
            for depth in args.depth:
                for threads, mode in modes:
                    faiss.omp_set_num_threads(threads)
                    space.set_index_parameter(index, "nprobe", nprobe)
                    faiss.extract_index_ivf(index).parallel_mode = mode
                    times, found = [], []
                    for q in queries:
                        t1 = time.perf_counter()
                        _, ids = index.search(q[None], 10 * depth)
                        got = ids[0][ids[0] >= 0]
                        if depth > 1 and rows is not None:
                            got = got[np.argsort(-(rows[got].astype(np.float32) @ q))][:20]
                        if depth > 1:
                            got = got[np.argsort(-(data[got] @ q))]
                        times.append(time.perf_counter() - t1)
                        found.append(got[:10])
                    print(f"  {spec} nprobe {nprobe} depth {depth} ({args.refine}) threads {threads}: recall@10 "
                          f"{recall_at_10(found, truth):.3f}, p50 {np.median(times) * 1000:.2f} ms, "
                          f"p95 {np.percentile(times, 95) * 1000:.2f} ms", flush=True)


def store_codes(data: np.ndarray, queries: np.ndarray, truth: np.ndarray, lists: int, codes: str,
                nprobes: list[int], depths: list[int]) -> None:
    """The store's IVF index with ``codes`` (int8 or sq8), built and searched as the store does, one thread."""
    faiss.omp_set_num_threads(2)
    t = time.perf_counter()
    ids = np.arange(len(data), dtype=np.int64)
    index = VectorIndex.build("auto", data.shape[1], True, HnswParams(), ids, data,
                              auto=AutoParams(switch_at=1, lists=lists, codes=codes))
    print(f"store IVF{lists} {codes}: built {time.perf_counter() - t:.1f}s, {index.memory_bytes() / len(data):.0f} "
          f"bytes/point", flush=True)
    faiss.omp_set_num_threads(1)
    for nprobe in nprobes:
        index.tuned = nprobe
        for depth in depths:
            times, found = [], []
            for q in queries:
                t1 = time.perf_counter()
                _, got = index.search(q, 10 * depth, None)
                if depth > 1:
                    got = got[np.argsort(-(data[got] @ q))]
                times.append(time.perf_counter() - t1)
                found.append(got[:10])
            print(f"  store {codes} nprobe {nprobe} depth {depth}: recall@10 {recall_at_10(found, truth):.3f}, "
                  f"p50 {np.median(times) * 1000:.2f} ms, p95 {np.percentile(times, 95) * 1000:.2f} ms", flush=True)


if __name__ == "__main__":
    main()
