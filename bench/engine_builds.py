"""A/B of llama.cpp CPU library builds: is a kernel patch faster, and are its vectors still the model's?

    python bench/engine_builds.py --build stock=/tmp/stock --build gelu=/tmp/gelu --repeats 3

Each ``--build NAME=DIR`` names a folder holding a ``libggml-cpu.so.0`` (``installed``: the venv's own). Every
measurement runs in a fresh child process whose ``LD_LIBRARY_PATH`` puts that folder first (llama-cpp-python's
libraries find their CPU backend through ``RUNPATH``, which ``LD_LIBRARY_PATH`` overrides), with the product's
embedder and defaults (the probe's weight type, threads, packing). The repeats are interleaved (build A, B, C,
then A, B, C again, the order rotated each round) so a load change on the machine hits every build alike; a
build's figure is its median, its noise the spread of its repeats. Shapes: ``short`` (SciFact queries),
``uniform`` (SciFact abstracts cut to ~196 tokens) and ``chunks`` (SciFact abstracts cut at 150 words, the real
chunk lengths). Quality: every build's vectors against the f32 weights on the first build (min and mean cosine),
so a patch that speeds up by changing the numbers shows it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "eval" / "scifact-train"
SHAPES = ("short", "uniform", "chunks")


def make_texts(n: int) -> dict[str, list[str]]:
    from indexer.engine.adapters import LlamaEmbedder
    from indexer.models import ensure_model

    tok = LlamaEmbedder(ensure_model())
    queries = [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").read_text().splitlines() if line]
    corpus = [json.loads(line)["text"] for line in (SCIFACT / "corpus.jsonl").read_text().splitlines() if line]
    uniform: list[str] = []
    for text in corpus:
        words = text.split()
        while len(words) > 40 and tok.count_tokens(" ".join(words)) > 196:
            words = words[: int(len(words) * 0.9)]
        if tok.count_tokens(" ".join(words)) >= 150:
            uniform.append(" ".join(words))
        if len(uniform) >= n:
            break
    chunks = []
    for text in corpus[1000 : 1000 + n]:  # cut at 150 words, and under the model's 256-token limit
        words = text.split()[:150]
        while tok.count_tokens(" ".join(words)) > 250:
            words = words[:-10]
        chunks.append(" ".join(words))
    tok.close()
    return {"short": queries[: n * 2], "uniform": uniform, "chunks": chunks}


def child(args: argparse.Namespace) -> None:
    """One build, one process: embed every shape once (after a warm-up), print seconds and tokens as JSON."""
    import numpy as np

    from indexer.core.normalization import Normalization
    from indexer.engine.adapters import LlamaEmbedder
    from indexer.models import ensure_model

    texts = json.loads(Path(args.texts).read_text())
    embedder = LlamaEmbedder(ensure_model(quant=args.quant) if args.quant else ensure_model())
    embedder.embed_batch(texts["short"][:32], Normalization.L2)
    out: dict[str, Any] = {}
    vectors = {}
    for shape in args.shapes.split(","):
        batch = texts[shape]
        tokens = sum(embedder.count_tokens(t) for t in batch)
        t0, c0 = time.perf_counter(), time.process_time()
        vecs = []
        for i in range(0, len(batch), 256):
            vecs.extend(embedder.embed_batch(batch[i : i + 256], Normalization.L2))
        out[shape] = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "tokens": tokens}
        vectors[shape] = np.asarray(vecs, dtype=np.float32)
    if args.vectors:
        np.savez(args.vectors, **vectors)
    embedder.close()
    print("RESULT " + json.dumps(out), flush=True)


def run_child(build_dir: str | None, texts: Path, shapes: str, quant: str | None, vectors: Path | None) -> dict:
    env = dict(os.environ)
    if build_dir:
        env["LD_LIBRARY_PATH"] = build_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    cmd = [sys.executable, __file__, "--child", "--texts", str(texts), "--shapes", shapes]
    if quant:
        cmd += ["--quant", quant]
    if vectors:
        cmd += ["--vectors", str(vectors)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"child for {build_dir or 'installed'} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def cosines(a, b) -> tuple[float, float]:
    import numpy as np

    an = a / np.linalg.norm(a, axis=1, keepdims=True)
    bn = b / np.linalg.norm(b, axis=1, keepdims=True)
    c = (an * bn).sum(axis=1)
    return float(c.min()), float(c.mean())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--texts-per-shape", type=int, default=400)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--quant", default=None, help="weight type (default: the probe's pick for this CPU)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--texts", help=argparse.SUPPRESS)
    ap.add_argument("--vectors", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    import numpy as np

    from indexer.models.native import machine_line

    print(machine_line(), flush=True)
    builds = [(b.split("=", 1)[0], None if b.split("=", 1)[1] == "installed" else b.split("=", 1)[1])
              for b in (args.build or ["installed=installed"])]
    with tempfile.TemporaryDirectory(prefix="engine-builds-") as tmp:
        texts = Path(tmp) / "texts.json"
        texts.write_text(json.dumps(make_texts(args.texts_per_shape)))
        ref = Path(tmp) / "ref.npz"
        run_child(builds[0][1], texts, args.shapes, "f32", ref)
        reference = np.load(ref)
        shapes = args.shapes.split(",")
        rates: dict[str, dict[str, list[float]]] = {name: {s: [] for s in shapes} for name, _ in builds}
        per_cpu: dict[str, dict[str, list[float]]] = {name: {s: [] for s in shapes} for name, _ in builds}
        quality: dict[str, dict[str, tuple[float, float]]] = {}
        for r in range(args.repeats):
            order = builds[r % len(builds):] + builds[: r % len(builds)]
            for name, path in order:
                vec = Path(tmp) / f"{name}.npz"
                res = run_child(path, texts, args.shapes, args.quant, vec if name not in quality else None)
                if name not in quality:
                    got = np.load(vec)
                    quality[name] = {s: cosines(got[s], reference[s]) for s in args.shapes.split(",")}
                for shape, fig in res.items():
                    rates[name][shape].append(fig["tokens"] / fig["seconds"])
                    per_cpu[name][shape].append(fig["tokens"] / fig["cpu"])
                print(f"round {r + 1} {name}: " + ", ".join(f"{s} {v[-1]:,.0f}" for s, v in rates[name].items()),
                      flush=True)
    base = builds[0][0]
    print(f"\n| build | shape | tok/s median (min-max) | vs {base} | tokens per CPU-second | vs {base} "
          "| min / mean cosine to f32 |")
    print("|---|---|---|---|---|---|---|")
    for name, _ in builds:
        for shape, vals in rates[name].items():
            med = statistics.median(vals)
            ratio = med / statistics.median(rates[base][shape])
            lo, mean = quality[name][shape]
            cpu = statistics.median(per_cpu[name][shape])
            cpu_ratio = cpu / statistics.median(per_cpu[base][shape])
            print(f"| {name} | {shape} | {med:,.0f} ({min(vals):,.0f}-{max(vals):,.0f}) | {ratio:.3f}x | "
                  f"{cpu:,.0f} | {cpu_ratio:.3f}x | {lo:.5f} / {mean:.5f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
