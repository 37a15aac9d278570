"""The tiny Qwen3-VL embedding fixture (``tests/fixtures/families/qwen3-vl-embedding``, made by
``tools/tiny_models/qwen3_vl.py``) converted by the product's converter: a text GGUF and its MTMD projector.

What the multimodal tests (and the images-in-folders tests after them) open: :func:`build` writes both files
for a weight type, :func:`images` gives the committed images' bytes, :func:`reference` transformers' outputs
(per image and prompt: token ids, media token count, LAST-pooled normalized vector). No torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FAMILY = "qwen3-vl-embedding"
ROOT = Path(__file__).resolve().parent / "fixtures" / "families" / FAMILY


def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "reference.json").read_text(encoding="utf-8"))
    return data


def images() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((ROOT / "images").iterdir())}


def build(out_dir: Path, quant: str = "f16") -> tuple[Path, Path]:
    """(model GGUF, projector GGUF) converted from the checkpoint into ``out_dir``."""
    from indexer.models.convert import convert_checkpoint, projector_path

    model = convert_checkpoint(ROOT / "checkpoint", out_dir / f"tiny-{FAMILY}-{quant}.gguf", quant,
                               source=f"test:{FAMILY}", name=f"tiny-{FAMILY}")
    return model, projector_path(model)


def open_model(model: Path, mmproj: Path | None = None, **kwargs: Any) -> Any:
    from indexer.engine.llama_embedding import LlamaEmbedding

    return LlamaEmbedding(str(model), mmproj_path=None if mmproj is None else str(mmproj), verbose=False,
                          n_threads=2, **kwargs)
