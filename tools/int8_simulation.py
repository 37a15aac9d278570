"""How close an int8 path could stay to f32: MiniLM's forward pass in numpy from the f32 GGUF, with the six weight
products of each layer done in simulated int8 of several granularities, against the same pass in f32.

A one-off study for the Engine speed issue (an int8 path of our own at cosine >= 0.999 where it measures faster):
before writing a VNNI kernel, find which quantization keeps the vectors at 0.999 to f32. Each scheme rounds the
inputs of every matrix product (weights and activations) to int8 with its own scales and multiplies exactly (int32
sums), as a VNNI kernel would; everything else (layer norms, softmax, GELU, pooling) stays f32.

    .venv/bin/python tools/int8_simulation.py MiniLM-f32.gguf --corpus .../scifact-train/corpus.jsonl [--texts 250]

Schemes: ``q8_0`` (ggml's: blocks of 32 along k for both sides, one scale each: what the existing q8_0 type
computes), ``blocks of 64`` / ``of 128`` (the same, fewer rescalings per dot product), ``row/token`` (one scale
per weight row and per token: a plain VNNI GEMM with no per-block rescaling), ``row/tensor`` (per-row weights, one
activation scale per product: ONNX Runtime's dynamic quantization is per-tensor on both sides),
``row/token+f32-ffn-down`` (the FFN's down product, whose input after GELU has the widest range, kept in f32).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def load(path: Path) -> tuple[dict[str, np.ndarray], dict[str, object]]:
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    tensors = {t.name: np.asarray(t.data, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
               for t in r.tensors}
    meta = {k: f.parts[f.data[0]].tolist() if f.data else None for k, f in r.fields.items()}
    return tensors, meta


def q_rows(x: np.ndarray) -> np.ndarray:
    """Symmetric int8 per row (last axis), dequantized."""
    s = np.abs(x).max(axis=-1, keepdims=True) / 127.0
    s[s == 0] = 1.0
    return np.clip(np.round(x / s), -127, 127) * s


def q_tensor(x: np.ndarray) -> np.ndarray:
    s = float(np.abs(x).max()) / 127.0 or 1.0
    return np.clip(np.round(x / s), -127, 127) * s


def q_blocks(x: np.ndarray, block: int = 32) -> np.ndarray:
    shape = x.shape
    b = x.reshape(*shape[:-1], shape[-1] // block, block)
    return q_rows(b).reshape(shape)


SCHEMES = {
    "f32": None,
    "q8_0": (q_blocks, q_blocks, ()),
    "blocks of 64": (lambda x: q_blocks(x, 64), lambda x: q_blocks(x, 64), ()),
    "blocks of 128": (lambda x: q_blocks(x, 128), lambda x: q_blocks(x, 128), ()),
    "row/token": (q_rows, q_rows, ()),
    "row/tensor": (q_rows, q_tensor, ()),
    "row/token+f32-ffn-down": (q_rows, q_rows, ("ffn_down",)),
}


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz and Stegun 7.1.26 (absolute error < 1.5e-7): numpy has no erf and scipy is not a dependency."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * np.exp(-a * a)
    return np.sign(x) * y


def gelu(x: np.ndarray) -> np.ndarray:
    """The erf form (BERT's)."""
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def forward(t: dict[str, np.ndarray], meta: dict[str, object], ids: list[int], scheme: str) -> np.ndarray:
    layers = int(meta["bert.block_count"][0])  # type: ignore[index]
    heads = int(meta["bert.attention.head_count"][0])  # type: ignore[index]
    eps = float(meta["bert.attention.layer_norm_epsilon"][0])  # type: ignore[index]
    quant = SCHEMES[scheme]

    def mm(x: np.ndarray, name: str) -> np.ndarray:
        w, b = t[name + ".weight"], t[name + ".bias"]
        if quant is not None and not any(k in name for k in quant[2]):
            w, x = quant[0](w), quant[1](x)
        return x.astype(np.float64) @ w.T.astype(np.float64) + b

    n = len(ids)
    x = t["token_embd.weight"][ids] + t["position_embd.weight"][:n] + t["token_types.weight"][0]
    x = layer_norm(x, t["token_embd_norm.weight"], t["token_embd_norm.bias"], eps)
    d = x.shape[1] // heads
    for i in range(layers):
        p = f"blk.{i}."
        q, k, v = (mm(x, p + f"attn_{s}").reshape(n, heads, d).transpose(1, 0, 2) for s in "qkv")
        a = q @ k.transpose(0, 2, 1) / np.sqrt(d)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(n, -1)
        x = layer_norm(x + mm(o, p + "attn_output"), t[p + "attn_output_norm.weight"], t[p + "attn_output_norm.bias"],
                       eps)
        h = mm(gelu(mm(x, p + "ffn_up")), p + "ffn_down")
        x = layer_norm(x + h, t[p + "layer_output_norm.weight"], t[p + "layer_output_norm.bias"], eps)
    v = x.mean(0)
    return v / np.linalg.norm(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="the f32 GGUF of a BERT-style embedding model")
    ap.add_argument("--corpus", type=Path, required=True, help="BEIR corpus.jsonl (texts cut at 256 tokens)")
    ap.add_argument("--texts", type=int, default=250)
    args = ap.parse_args(argv)
    import llama_cpp

    t, meta = load(args.model)
    vocab = llama_cpp.Llama(model_path=str(args.model), vocab_only=True, verbose=False)
    texts = []
    with args.corpus.open() as fh:
        for line in fh:
            doc = json.loads(line)
            texts.append((doc.get("title", "") + " " + doc.get("text", "")).strip())
            if len(texts) >= args.texts:
                break
    token_lists = [vocab.tokenize(s.encode(), add_bos=True, special=True)[:256] for s in texts]
    ref = np.stack([forward(t, meta, ids, "f32") for ids in token_lists])
    print(f"{args.model.name}: {len(token_lists)} texts, {sum(map(len, token_lists)):,} tokens")
    print("| scheme | min cosine to f32 | mean | texts under 0.999 |")
    print("|---|---|---|---|")
    for scheme in SCHEMES:
        if scheme == "f32":
            continue
        got = np.stack([forward(t, meta, ids, scheme) for ids in token_lists])
        cos = (got * ref).sum(1)
        print(f"| {scheme} | {cos.min():.5f} | {cos.mean():.5f} | {(cos < 0.999).sum()} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
