"""Tokenization choice: exactness and speed of llama.cpp's tokenizer (as is, and with our text fixes) against
the model's own tokenizer.json through the tokenizers library, for every family we convert.

Exactness: texts whose ids equal transformers' ids (tests/fixtures/families/*/reference.json, and MiniLM's
tests/fixtures/reference_embeddings.json). Speed: tokenizing a corpus of mixed-script paragraphs (ms per 1,000
texts, one thread of the engine's call path: ``LlamaEmbedding._tokenize_items``).

Usage: python bench/tokenizer_choice.py [--minilm GGUF] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from indexer.engine import tokenization  # noqa: E402
from indexer.engine.llama_embedding import LlamaEmbedding  # noqa: E402
from indexer.models.convert import convert_checkpoint  # noqa: E402
from indexer.models.native import machine_line  # noqa: E402

FAMILIES = ROOT / "tests" / "fixtures" / "families"
MINILM_REFS = [ROOT / "tests" / "fixtures" / f for f in ("reference_embeddings.json", "multilingual_reference.json")]
MODES = (tokenization.RUNTIME, tokenization.RUNTIME_FIXED, tokenization.REFERENCE)


def _cases() -> list[tuple[str, dict]]:
    out = []
    for folder in sorted(FAMILIES.iterdir()):
        ref = json.loads((folder / "reference.json").read_text(encoding="utf-8"))
        out.append((folder.name, ref))
    return out


def _exact(model: LlamaEmbedding, ref: dict) -> tuple[int, int]:
    limit = int(ref.get("max_seq_length") or 0)
    good = 0
    for text, expected in zip(ref["texts"], ref["token_ids"], strict=True):
        got = model.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if limit and len(expected) >= limit:
            got, expected = got[: len(expected) - 1], expected[: len(expected) - 1]
        good += got == expected
    return good, len(ref["texts"])


def _speed(model: LlamaEmbedding, texts: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        model._tokenize_items(texts)
        best = min(best, time.perf_counter() - t0)
    return best * 1000 / len(texts) * 1000


def _corpus(ref: dict) -> list[str]:
    paragraphs = [" ".join(ref["texts"][:12])] * 4
    return [f"{i} " + " ".join(paragraphs) for i in range(1000)]  # ~1,000 texts of ~300 words


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minilm", type=Path, help="the default model's GGUF (converted by this commit)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(machine_line(), flush=True)  # every figure names its CPU
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        models = [(name, convert_checkpoint(FAMILIES / name / "checkpoint", Path(tmp) / f"{name}.gguf", "f16"), ref)
                  for name, ref in _cases()]
        if args.minilm:
            items = [i for f in MINILM_REFS for i in json.loads(f.read_text(encoding="utf-8"))["items"]]
            ref = {"texts": [i["text"] for i in items], "token_ids": [i["token_ids"] for i in items],
                   "max_seq_length": 256}
            models.append(("all-MiniLM-L6-v2", args.minilm, ref))
        for name, path, ref in models:
            model = LlamaEmbedding(str(path), verbose=False, n_threads=1, parallel_contexts=1)
            try:
                for mode in MODES:
                    model.use_tokenizer(mode)
                    good, n = _exact(model, ref)
                    ms = _speed(model, _corpus(ref), args.repeat)
                    rows.append({"family": name, "mode": mode, "exact": f"{good}/{n}", "us_per_text": round(ms, 1)})
                    print(f"{name:20s} {mode:20s} exact {good:2d}/{n:2d}  {ms:8.1f} us/text", flush=True)
            finally:
                model.close()
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
