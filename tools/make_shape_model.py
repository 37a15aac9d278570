#!/usr/bin/env python3
"""A sentence-transformers checkpoint at a big model's shape with random weights, for speed comparisons only.

    /path/to/refvenv/bin/python tools/make_shape_model.py --tokenizer-from ST_DIR --out DIR [--shape bge-m3]

Speed does not depend on the weights' values, so a random checkpoint of the right shape measures what a real one
would cost without downloading it (no model hub is reachable here). ``bge-m3`` is an XLM-RoBERTa-large: 24
layers, hidden 1,024, 16 heads, FFN 4,096. It is built here as a BERT of that shape with the tokenizer of
``--tokenizer-from`` (all-MiniLM-L6-v2's WordPiece): the encoder's compute is the same; only the vocabulary (250k
rows in XLM-R, an embedding lookup) and the position offset differ, which cost nothing measurable. Mean pooling,
as bge-m3's dense head uses CLS: pooling is a negligible share either way. A one-off tool: torch never enters the
product or its tests. Convert the result with the product's converter (``indexer models build`` or
``convert_checkpoint``) and bench it with bench/embed_throughput.py ``--model`` and ``--st-model``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

SHAPES = {"bge-m3": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                     "intermediate_size": 4096, "max_position_embeddings": 514}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer-from", required=True, type=Path, help="a sentence-transformers BERT model dir")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="bge-m3")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(args.seed)
    src = args.tokenizer_from
    base = json.loads((src / "config.json").read_text())
    config = BertConfig(vocab_size=base["vocab_size"], type_vocab_size=base.get("type_vocab_size", 2),
                        hidden_act="gelu", **SHAPES[args.shape])
    model = BertModel(config).eval()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(args.out), safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json",
                 "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        if (src / name).exists():
            shutil.copy(src / name, args.out / name)
    pooling = args.out / "1_Pooling"
    pooling.mkdir(exist_ok=True)
    (pooling / "config.json").write_text(json.dumps({"word_embedding_dimension": config.hidden_size,
                                                     "pooling_mode_mean_tokens": True}))
    print(f"wrote {args.out} ({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, {args.shape} shape)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
