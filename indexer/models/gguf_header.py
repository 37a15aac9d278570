"""A GGUF file's header read fast: chosen metadata values and the tensor table, nothing else decoded.

gguf-py's ``GGUFReader`` decodes every metadata value into numpy arrays, the vocabulary's tens of thousands of
strings included (1.5 s for all-MiniLM-L6-v2 on a 2-core Xeon), and the model checks run on every model load
and every ``indexer status``. This reader seeks over what it is not asked for (26 ms for the same file).
Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (version 2 and 3, little-endian).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from indexer.errors import ModelError

# Metadata value types with a fixed size, by type id; 8 is a string, 9 an array.
_FIXED = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class Header:
    values: dict[str, Any] = field(default_factory=dict)  # the metadata values asked for (scalars and strings)
    tensors: list[tuple[tuple[int, ...], int]] = field(default_factory=list)  # (dims, ggml type) per tensor


def read_header(path: str | os.PathLike[str], keys: Iterable[str] = ()) -> Header:
    """The values of ``keys`` (those present; arrays are skipped) and the tensor table of a GGUF file.
    Raises ValueError for a file that is not GGUF or is truncated, OSError when it cannot be read."""
    wanted = set(keys)
    with open(path, "rb") as f:
        try:
            return _read(f, wanted)
        except struct.error as exc:
            raise ValueError(f"truncated GGUF header ({exc})") from exc


def _read(f: BinaryIO, wanted: set[str]) -> Header:
    def read(fmt: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        data = f.read(size)
        if len(data) != size:
            raise ValueError("truncated GGUF header")
        return struct.unpack(fmt, data)

    def string() -> bytes:
        (n,) = read("<Q")
        data = f.read(n)
        if len(data) != n:
            raise ValueError("truncated GGUF header")
        return data

    def skip(kind: int) -> None:
        if kind == _STRING:
            (n,) = read("<Q")
            f.seek(n, 1)
        elif kind == _ARRAY:
            inner, count = read("<IQ")
            if inner in _FIXED:
                f.seek(struct.calcsize(_FIXED[inner]) * count, 1)
            else:
                for _ in range(count):
                    skip(inner)
        elif kind in _FIXED:
            f.seek(struct.calcsize(_FIXED[kind]), 1)
        else:
            raise ValueError(f"unknown GGUF metadata value type {kind}")

    if f.read(4) != b"GGUF":
        raise ValueError("not a GGUF file (no GGUF magic)")
    (version,) = read("<I")
    if version < 2:
        raise ValueError(f"GGUF version {version} is not supported")
    n_tensors, n_kv = read("<QQ")
    values: dict[str, Any] = {}
    for _ in range(n_kv):
        key = string().decode("utf-8", "replace")
        (kind,) = read("<I")
        if key in wanted and kind == _STRING:
            values[key] = string().decode("utf-8", "replace")
        elif key in wanted and kind in _FIXED:
            values[key] = read(_FIXED[kind])[0]
        else:
            skip(kind)
    tensors = []
    for _ in range(n_tensors):
        string()
        (n_dims,) = read("<I")
        dims = read(f"<{n_dims}Q")
        kind, _offset = read("<IQ")
        tensors.append((tuple(int(d) for d in dims), int(kind)))
    return Header(values, tensors)


def weight_types(path: str | os.PathLike[str]) -> set[str]:
    """The types of a GGUF file's matrices (2-D tensors), by ggml's names (``q8_0``, ``f16``, ``q4_K``, ...).

    Read from the header's tensor table, skipping the metadata values (gguf-py's reader decodes every value, the
    vocabulary's strings included: 1.5 s for MiniLM, paid on every model load and ``status``)."""
    from gguf import GGMLQuantizationType

    from indexer.models.quantize import canonical

    try:
        header = read_header(path)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: not a readable GGUF file ({exc}); point at a .gguf model") from exc
    kinds = set()
    for dims, kind in header.tensors:
        if len(dims) >= 2 and int(dims[1]) > 1:
            try:
                kinds.add(canonical(GGMLQuantizationType(kind).name))
            except ValueError:
                kinds.add(f"type{kind}")
    return kinds
