"""Read and write the safetensors format with numpy alone (no torch, no safetensors package).

Layout: 8-byte little-endian header length, a JSON header mapping tensor names to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to the data section), then raw
little-endian tensor data.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from indexer.errors import ModelError

_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # widened to float32 on read
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {np.dtype("<f8"): "F64", np.dtype("<f4"): "F32", np.dtype("<f2"): "F16", np.dtype("<i8"): "I64",
          np.dtype("<i4"): "I32", np.dtype("<i2"): "I16", np.dtype("i1"): "I8", np.dtype("u1"): "U8",
          np.dtype("?"): "BOOL"}


def read_safetensors(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """Yield ``(name, array)`` for each tensor of one file; arrays are memory-mapped, BF16 becomes float32."""
    try:
        with open(path, "rb") as fh:
            (header_len,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(header_len))
    except (OSError, struct.error, ValueError) as exc:
        raise ModelError(f"{path}: not a readable safetensors file ({exc}); re-download the checkpoint") from exc
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype_name = info["dtype"]
        if dtype_name not in _DTYPES:
            raise ModelError(f"{path}: tensor {name} has unsupported dtype {dtype_name}")
        begin, end = info["data_offsets"]
        raw = data[begin:end].view(_DTYPES[dtype_name]).reshape(info["shape"])
        if dtype_name == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        yield name, raw


def read_checkpoint_tensors(src_dir: Path) -> Iterator[tuple[str, np.ndarray]]:
    """All tensors of a checkpoint folder: ``model.safetensors`` or the shards its index names."""
    single = src_dir / "model.safetensors"
    index = src_dir / "model.safetensors.index.json"
    if single.is_file():
        yield from read_safetensors(single)
    elif index.is_file():
        weight_map: Mapping[str, str] = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        for shard in sorted(set(weight_map.values())):
            yield from read_safetensors(src_dir / shard)
    else:
        hint = " (pytorch_model.bin needs torch to read; convert it to safetensors first)" if (
            src_dir / "pytorch_model.bin").exists() else ""
        raise ModelError(f"{src_dir}: no model.safetensors found{hint}")


def write_safetensors(path: Path, tensors: Mapping[str, np.ndarray]) -> None:
    """Write ``tensors`` as one safetensors file (used to build tiny test checkpoints)."""
    header: dict[str, object] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, array in tensors.items():
        arr = np.ascontiguousarray(array)
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        blob = arr.astype(dtype).tobytes()
        header[name] = {"dtype": _NAMES[np.dtype(dtype)], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw_header = json.dumps(header).encode("utf-8")
    raw_header += b" " * (-len(raw_header) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw_header)))
        fh.write(raw_header)
        for blob in blobs:
            fh.write(blob)
