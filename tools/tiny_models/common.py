"""Shared by the tiny-checkpoint builders (one script per family, run with a Python that has torch and
transformers, e.g. ``/work/benchvenv/bin/python tools/tiny_models/xlm_roberta.py``).

Each builder makes a checkpoint of its family's architecture with random weights (a few layers, small hidden
size) and a tokenizer trained on local text by the real tokenizer library, saves it under
``tests/fixtures/families/<family>/`` (``checkpoint/`` as Hugging Face writes it, plus ``reference.json``), and
records the reference implementation's outputs for :data:`TEXTS` and :data:`RERANK`:

``reference.json``::

    {"family": str, "architecture": str, "max_seq_length": int,
     "texts": [str], "token_ids": [[int]],              # the reference tokenizer, special tokens added
     "vectors": [[float]],                               # pooled and L2-normalized, per text (embedding models)
     "rerank": {"query": str, "documents": [str], "scores": [float]}}   # reranker models: the seed's score

The tests (tests/families/) never import torch: they read these files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "families"
SCIFACT = ROOT.parent / "shared" / "eval" / "scifact-train" / "corpus.jsonl"

_LONG = " ".join(
    f"Sentence {i} of a very long document about glaciers, rivers and the valleys they carve over time."
    for i in range(400)
)

# Texts in the tokenizers' training data: every script among them gets real pieces, not only unknowns.
TRAINED_TEXTS: list[str] = [
    "glaciers carve valleys",
    "What causes rain?",
    "The quick brown fox jumps over the lazy dog.",
    "Crème brûlée, naïve café, Ångström, Øresund and the façade of São Paulo.",
    "Die Gletscher formen Täler über Jahrtausende; Größe und Übermaß.",
    "冰川在数千年间塑造了山谷。",
    "東京は日本の首都です。こんにちは、世界！",
    "빙하는 계곡을 깎는다",
    "Emoji in text 🧊🏔️🌊 and a family 👨‍👩‍👧 too 🚀",
    "Mixed   whitespace\tand\nnew lines\n\nin one text",
    "Numbers 3.14159, 2026-12-01, $1,000,000 and e-mail test@example.com",
    "a",
    "الأنهار الجليدية تنحت الوديان عبر آلاف السنين.",
    "हिमनद हज़ारों वर्षों में घाटियाँ तराशते हैं।",
    "빙하 glaciers 氷河 冰川 الجليد हिमनद 🧊 mixed in one line",
]

# Texts kept out of the training data: characters no vocabulary holds (the reference maps them to its unknown
# token, or to bytes; llama.cpp's whitespace BPE drops them).
UNSEEN_TEXTS: list[str] = [
    "unknown glyphs ꙮ𓀀𓀁 and ᚠᛇᚻ runes together",
]

TEXTS: list[str] = [*TRAINED_TEXTS, *UNSEEN_TEXTS, _LONG]

RERANK = {
    "query": "What causes rain?",
    "documents": [
        "Clouds are made of water droplets that grow and fall as rain.",
        "The stock market fell sharply on Tuesday.",
        "Rain forms when water vapour condenses around dust particles.",
        "冰川在数千年间塑造了山谷。",
        "Emoji 🌧️ rain clouds",
    ],
}


def training_text(limit: int = 4000, seed: int = 0) -> list[str]:
    """Local text to train a tokenizer on: SciFact abstracts plus the test texts (so every script, CJK and
    emoji among them, is in the vocabulary) and a little generated CJK."""
    lines: list[str] = []
    if SCIFACT.is_file():
        with SCIFACT.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= limit:
                    break
                doc = json.loads(line)
                lines.append(f"{doc.get('title', '')} {doc.get('text', '')}".strip())
    rng = random.Random(seed)
    cjk = [chr(c) for c in range(0x4E00, 0x4E00 + 400)]
    for _ in range(200):
        lines.append("".join(rng.choice(cjk) for _ in range(rng.randint(5, 30))))
    lines.extend([*TRAINED_TEXTS, _LONG] * 20)
    return lines


def write_reference(family: str, payload: dict) -> Path:
    """Write ``reference.json`` of a family (floats rounded to 7 significant digits to keep it small)."""

    def rounded(value: object) -> object:
        if isinstance(value, float):
            return float(f"{value:.7g}")
        if isinstance(value, list):
            return [rounded(v) for v in value]
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        return value

    out = FIXTURES / family / "reference.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rounded({"family": family, **payload}), ensure_ascii=False) + "\n", encoding="utf-8")
    return out
