#!/usr/bin/env python3
"""Export a sentence-transformers checkpoint to ONNX (fp32) and its dynamic int8 twin: the ONNX Runtime reference
of bench/embed_throughput.py (``--ort-python``), set up as FastEmbed-style users run it.

    /path/to/refvenv/bin/python tools/export_onnx.py --checkpoint DIR --out DIR

Run with the python of a venv holding torch, transformers, onnx and onnxruntime (a one-off tool: torch never
enters the product or its tests). ``torch.onnx.export`` (TorchScript exporter, opset 17, dynamic batch and sequence
axes) writes ``model.onnx`` (the transformer's last hidden state; pooling is the bench's), then
``onnxruntime.quantization.quantize_dynamic`` with QInt8 weights writes ``model-int8.onnx``; ``tokenizer.json`` is
copied beside them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, type=Path, help="sentence-transformers / Hugging Face model dir")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    args.out.mkdir(parents=True, exist_ok=True)
    model = AutoModel.from_pretrained(str(args.checkpoint)).eval()
    tok = AutoTokenizer.from_pretrained(str(args.checkpoint))
    sample = tok(["an example sentence", "and another, longer one to pad"], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    fp32 = args.out / "model.onnx"

    class Encoder(torch.nn.Module):  # inputs by name: the model's forward takes more positional arguments
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    with torch.no_grad():
        torch.onnx.export(Encoder().eval(), tuple(sample[n] for n in names), str(fp32), input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=args.opset,
                          do_constant_folding=True, dynamo=False)
    quantize_dynamic(str(fp32), str(args.out / "model-int8.onnx"), weight_type=QuantType.QInt8)
    src = args.checkpoint / "tokenizer.json"
    if src.exists():
        shutil.copy(src, args.out / "tokenizer.json")
    else:
        tok.save_pretrained(str(args.out))
    print(f"wrote {fp32} and {args.out / 'model-int8.onnx'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
