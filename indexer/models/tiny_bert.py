"""The native probe's own models: tiny random-weight BERTs written with numpy, never a user file.

Two shapes, because the kernels llama.cpp picks depend on a matrix's widths:

* **MiniLM's widths** (hidden 384, 12 heads, FFN 1536; one layer) at f32, f16, bf16 and q8_0, written by our
  converter: the kernels of the default model, so the probe's timing of the candidate default types means
  something;
* **widths that are multiples of 256** (hidden 256, 4 heads, FFN 1024) for the k-quants and i-quants: their rows
  must be multiples of 256 (QK_K), or llama.cpp's quantizer falls back (q4_K -> q5_0, q6_K -> q8_0) and the AMX
  k-quant kernels never run. Written at f32 by our converter, then *purely* at one type by llama.cpp's own
  quantizer (:mod:`indexer.models.quantize`, in a child); the written file is read back and must hold the type
  it claims.

The files live in the probe's folder and are named by converter and probe version, so they are written once.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from indexer.errors import ModelError


@dataclass(frozen=True)
class Shape:
    name: str
    hidden: int
    heads: int
    ffn: int
    layers: int = 1
    positions: int = 128


MINILM = Shape("tiny-bert", 384, 12, 1536)
QK = Shape("tiny-bert-qk", 256, 4, 1024)
#: the types our converter writes directly (at MiniLM's widths)
CONVERTER_TYPES = ("q8_0", "bf16", "f16", "f32")

TINY_HIDDEN = MINILM.hidden
TINY_WORDS = ("the", "a", "cat", "dog", "sat", "on", "mat", "fish", "swim", "river", "blue", "sky", "runs", "fast",
    "slow", "red", "green", "house", "tree", "bird", "flies", "over", "under", "water", "is", "are", "what",
    "where", "how", "why", "who", "when", "big", "small",)


def probe_texts() -> list[str]:
    """Four texts of 60 words of the tiny vocabulary (~250 tokens in all)."""
    words = TINY_WORDS
    return [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(60)) for i in range(4)]


def _file(folder: Path, shape: Shape, quant: str, probe_version: int) -> Path:
    from indexer.models.convert import CONVERTER_VERSION

    return folder / f"{shape.name}-c{CONVERTER_VERSION}-p{probe_version}-{quant}.gguf"


def tiny_models(folder: Path, probe_version: int) -> dict[str, Path]:
    """The probe's MiniLM-width files, one per type of :data:`CONVERTER_TYPES`, written once."""
    out = {q: _file(folder, MINILM, q, probe_version) for q in CONVERTER_TYPES}
    _convert(folder, MINILM, {q: p for q, p in out.items() if not p.is_file()})
    return out


def quantized_models(folder: Path, types: list[str], probe_version: int) -> tuple[Path, dict[str, Path | str]]:
    """The probe's 256-width f32 reference file and, for each of ``types``, a file purely of that type, or the
    reason it could not be written (llama.cpp's quantizer failed or died, or wrote another type)."""
    from indexer.models.gguf_header import weight_types
    from indexer.models.quantize import NEEDS_IMATRIX, TYPE_FTYPES, run_quantizer

    reference = _file(folder, QK, "f32", probe_version)
    if not reference.is_file():
        _convert(folder, QK, {"f32": reference})
    out: dict[str, Path | str] = {}
    jobs = []
    for quant in types:
        path = _file(folder, QK, quant, probe_version)
        if quant not in TYPE_FTYPES:
            out[quant] = "llama.cpp's quantizer cannot write this type, so the probe cannot prove it"
        elif path.is_file():
            out[quant] = path
        else:
            out[quant] = path
            jobs.append({"src": str(reference), "dst": str(path), "ftype": TYPE_FTYPES[quant], "pure": True,
                         "imatrix": quant in NEEDS_IMATRIX, "threads": 1})
    if jobs:
        try:
            run_quantizer(jobs, timeout=120.0, what="writing the probe's tiny model")
        except ModelError as exc:  # a quantizer death is not a decode death: the types stay unproven
            for job in jobs:
                if not Path(str(job["dst"])).is_file():
                    out[_quant_of(job, out)] = str(exc)
    for quant, got in list(out.items()):
        if not isinstance(got, Path):
            continue
        if not got.is_file():
            out[quant] = "llama.cpp's quantizer wrote no file of this type (see its log with -v)"
            continue
        held = weight_types(got)
        if quant not in held:  # the quantizer fell back: such a file would not prove the type
            got.unlink(missing_ok=True)
            out[quant] = f"llama.cpp's quantizer wrote {', '.join(sorted(held))} instead of {quant}"
    return reference, out


def _quant_of(job: dict[str, object], out: dict[str, Path | str]) -> str:
    return next(q for q, p in out.items() if isinstance(p, Path) and str(p) == job["dst"])


def _convert(folder: Path, shape: Shape, files: dict[str, Path]) -> None:
    if not files:
        return
    from indexer.models.convert import convert_checkpoint

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".tiny-") as tmp:
        ckpt = Path(tmp) / shape.name
        write_tiny_checkpoint(ckpt, shape)
        for quant, path in files.items():
            convert_checkpoint(ckpt, path, quant, name="indexer-native-probe")


def write_tiny_checkpoint(root: Path, shape: Shape = MINILM, seed: int = 0) -> None:
    """A random BERT checkpoint (safetensors, config, WordPiece vocabulary, MEAN pooling) written with numpy."""
    import numpy as np

    from indexer.models.safetensors import write_safetensors

    rng = np.random.default_rng(seed)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *TINY_WORDS]
    h, f = shape.hidden, shape.ffn

    def mat(rows: int, cols: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def vec(n: int, center: float = 0.0) -> np.ndarray:
        return (center + rng.standard_normal(n) * 0.02).astype(np.float32)

    w: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": mat(len(vocab), h, 0.5),
        "embeddings.position_embeddings.weight": mat(shape.positions, h, 0.2),
        "embeddings.token_type_embeddings.weight": mat(2, h, 0.2),
        "embeddings.LayerNorm.weight": vec(h, 1.0),
        "embeddings.LayerNorm.bias": vec(h),
    }
    for i in range(shape.layers):
        p = f"encoder.layer.{i}."
        for part in ("query", "key", "value"):
            w[f"{p}attention.self.{part}.weight"] = mat(h, h)
            w[f"{p}attention.self.{part}.bias"] = vec(h)
        w[f"{p}attention.output.dense.weight"] = mat(h, h)
        w[f"{p}attention.output.dense.bias"] = vec(h)
        w[f"{p}attention.output.LayerNorm.weight"] = vec(h, 1.0)
        w[f"{p}attention.output.LayerNorm.bias"] = vec(h)
        w[f"{p}intermediate.dense.weight"] = mat(f, h)
        w[f"{p}intermediate.dense.bias"] = vec(f)
        w[f"{p}output.dense.weight"] = mat(h, f)
        w[f"{p}output.dense.bias"] = vec(h)
        w[f"{p}output.LayerNorm.weight"] = vec(h, 1.0)
        w[f"{p}output.LayerNorm.bias"] = vec(h)
    root.mkdir(parents=True, exist_ok=True)
    write_safetensors(root / "model.safetensors", w)
    config = {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_size": h, "num_attention_heads": shape.heads,
        "num_hidden_layers": shape.layers, "intermediate_size": f, "max_position_embeddings": shape.positions,
        "type_vocab_size": 2, "vocab_size": len(vocab), "hidden_act": "gelu", "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute",
    }
    (root / "config.json").write_text(json.dumps(config))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (root / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    (root / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]))
    (root / "1_Pooling").mkdir(exist_ok=True)
    (root / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": h, "pooling_mode_mean_tokens": True}))
