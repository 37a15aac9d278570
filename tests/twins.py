"""Twins of quantized test models at f16: the tests run on a machine whose llama.cpp cannot run q8_0.

The committed test reranker is q8_0 (25 MB instead of 46). Where the native probe excludes q8_0 (llama-cpp-python
0.3.36 built natively on an AMX CPU without our fix), the tests use its f16 twin: the same GGUF with every q8_0
tensor dequantized (gguf's own reference dequantizer) and stored as f16, all metadata copied.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np


def f16_twin(src: Path, out: Path) -> Path:
    """Write (once) ``out``: ``src`` with q8_0 tensors stored as f16 and ``general.file_type`` MOSTLY_F16."""
    if out.is_file() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    reader = gguf.GGUFReader(str(src))
    arch = str(reader.fields["general.architecture"].contents())
    tmp = out.with_name(f".{out.name}.tmp")
    writer = gguf.GGUFWriter(str(tmp), arch)
    try:
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name in ("general.architecture", "general.file_type"):
                continue
            kind = field.types[0]
            sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        for tensor in reader.tensors:
            if tensor.tensor_type == gguf.GGMLQuantizationType.Q8_0:
                data = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float16)
            else:
                data = np.array(tensor.data)
            writer.add_tensor(tensor.name, data)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    tmp.replace(out)
    return out


def refused_here(path: Path, quant: str = "q8_0") -> bool:
    """Where this machine's llama.cpp cannot run ``quant`` (the native probe's verdict), assert that opening
    ``path`` is refused with a clear error before any native call, and return True: the caller's test then
    checks the refusal instead of the numbers. Returns False where ``quant`` runs."""
    import pytest

    from indexer.engine.llama_embedding import LlamaEmbedding
    from indexer.errors import ModelError
    from indexer.models import native

    if native.probe().runs(quant):
        return False
    with pytest.raises(ModelError, match=rf"{quant} weights, which llama.cpp on this machine cannot run"):
        LlamaEmbedding(str(path), verbose=False)
    return True
