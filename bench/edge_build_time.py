"""Where an embedded-Qdrant build's time goes: the store's background build (copy, child process, swap) of points
written through ``EdgeStore``, against the engine's own ``optimize()`` in-process on a copy of the same shard.

The points are bench/scale.py's SciFact-derived set: ``--points generated`` (the generator's mixes only) or
``--points bench`` (the bench's own million: the real chunks first, then the generator's). Measured on the AMD EPYC
Zen 4 (docs/benchmarks.md#recall-session-6): at 1M the store's build is ~10 % over the engine's, and the bench's
points take 2.7x the generator's (524 s vs 194 s) while at 200k they cost the same: the build time is the points'.

``--code DIR`` builds with the store of another version (its ``plugins`` and ``indexer`` packages, same venv and
engine), for a ratio against the previous version in the same hour: ``git worktree add ../v-old 94d2264`` is the
commit that measured 337 s on 2026-12-01 (docs/benchmarks.md#recall-session-7).

    python bench/edge_build_time.py --state DATA/state.sqlite --n 1000000 --points bench [--searches 50] [--engine]
    python bench/edge_build_time.py --state DATA/state.sqlite --n 1000000 --points bench --code ../v-old
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import scale  # noqa: E402  (bench/scale.py: the vector sets)

from indexer.models.native import machine_line  # noqa: E402


def use_code(root: Path) -> None:
    """Import ``plugins`` and ``indexer`` from ``root`` instead of this checkout (bench/scale.py stays ours: the
    vector sets must be the same points)."""
    if not (root / "plugins" / "qdrant" / "edge.py").is_file():
        raise SystemExit(f"--code {root}: no plugins/qdrant/edge.py there; give a checkout of this repository")
    here = str(Path(__file__).resolve().parents[1])
    sys.path[:] = [str(root)] + [p for p in sys.path if p != here]
    for name in [m for m in sys.modules if m.split(".")[0] in ("plugins", "indexer")]:
        del sys.modules[name]


def main() -> None:
    print(machine_line(), flush=True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, required=True, help="state.sqlite whose vector cache holds real chunks")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--points", choices=["generated", "bench"], default="bench")
    ap.add_argument("--searches", type=int, default=0, help="exact searches (chunk vectors) before the build")
    ap.add_argument("--engine", action="store_true", help="also optimize() a copy of the shard in-process")
    ap.add_argument("--work", type=Path, help="folder for the shards (default: a temporary one)")
    ap.add_argument("--code", type=Path, help="a checkout of another version whose store builds (same venv)")
    args = ap.parse_args()
    if args.code:
        use_code(args.code.resolve())

    import qdrant_edge as qe

    from plugins.qdrant import edge
    from plugins.qdrant.edge import EdgeStore

    print(f"store code: {Path(edge.__file__).resolve().parents[2]} (m {edge.HNSW_M}, ef_construct "
          f"{edge.HNSW_EF_CONSTRUCT})", flush=True)

    real, _ = scale.real_vectors(args.state)
    data = (np.concatenate([real, scale.generated(real, args.n - len(real))]) if args.points == "bench"
            else scale.generated(real, args.n))
    work = Path(args.work or tempfile.mkdtemp(prefix="edge-build-"))
    shutil.rmtree(work / "store", ignore_errors=True)
    store = EdgeStore(work / "store")
    store.builder.threshold = 10**12  # no build while writing: one build of everything, timed below
    store.ensure_collection("bench", data.shape[1], {})
    t = time.perf_counter()
    for start in range(0, len(data), 2000):
        store.upsert("bench", scale.points_for(data, start, min(len(data), start + 2000)))
    print(f"{len(data):,} points ({args.points}) written through the store in {time.perf_counter() - t:.1f}s",
          flush=True)
    for q in data[: args.searches]:
        store.search("bench", q, 10)
    live = store._dir("bench")
    copy = work / "engine-copy"
    if args.engine:
        store._require("bench").flush()
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(live, copy)
    t = time.perf_counter()
    store.builder.threshold = 1
    store.builder.maybe_start("bench", store._require("bench"), live, store._swap_built)
    store.builder.threshold = 10**12
    while store.builder.building("bench"):
        time.sleep(0.5)
    steps = ", ".join(f"{k} {v:.1f}s" for k, v in store.builder.completed[-1][2].items())
    print(f"the store's background build: {time.perf_counter() - t:.1f}s ({steps})", flush=True)
    store.close()
    if args.engine:
        shard = qe.EdgeShard.load(str(copy))
        t = time.perf_counter()
        shard.optimize()
        print(f"the engine's optimize() in-process on a copy of the same shard: {time.perf_counter() - t:.1f}s",
              flush=True)
        shard.close()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
