"""Models built from a Hugging Face checkpoint folder the user brings (``indexer models build --from PATH``).

They live in the model cache beside the catalogue's builds, as ``<name>-<weight type>.gguf`` with
``indexer.source = folder:<absolute path>`` and the weights' sha256 in their metadata, and are found by name
(``embed_model = "my-model"`` or ``"my-model:q8_0"``) like catalogue models. Unsupported architectures are refused
by the converter before anything is written, naming what it supports. A vision checkpoint (Qwen3-VL embedding) also
gets its MTMD projector, ``<name>-<weight type>.mmproj.gguf`` beside the model, listed with it."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from indexer.errors import ModelError
from indexer.models.catalogue import CATALOGUE
from indexer.models.convert import BUILD_QUANTS, build_quant, convert_checkpoint, projector_path

SOURCE_PREFIX = "folder:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class LocalModel:
    name: str
    quant: str
    path: Path
    source: str
    size_bytes: int
    projector: Path | None = None  # the model's MTMD projector, when it has one


def _models_dir() -> Path:
    from indexer.models.cache import models_dir

    return models_dir()


def model_name_for(src: Path, name: str | None) -> str:
    """The cache name of a folder's model: ``name``, else the folder's name made safe."""
    chosen = name or re.sub(r"[^A-Za-z0-9._-]+", "-", src.resolve().name).strip("-.") or "model"
    if not _NAME.match(chosen):
        raise ModelError(f"model name {chosen!r} is not usable; use 1-100 letters, digits, '.', '_' or '-'")
    if chosen in CATALOGUE:
        raise ModelError(f"{chosen!r} is a catalogue model; give the folder's model another name (--name NAME)")
    return chosen


def weights_sha256(src: Path) -> str:
    """sha256 over the checkpoint's safetensors files (name and bytes), in name order."""
    digest = hashlib.sha256()
    for file in sorted(src.glob("*.safetensors")):
        digest.update(file.name.encode() + b"\0")
        with file.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def build_from_folder(src: str | Path, name: str | None = None, quant: str | None = None) -> Path:
    """Convert the checkpoint folder ``src`` into the model cache; returns the GGUF path (rebuilt each time). A
    vision checkpoint's projector is written beside it (:func:`~indexer.models.convert.projector_path`)."""
    from indexer.models.cache import default_quant

    folder = Path(src).expanduser()
    if not folder.is_dir():
        raise ModelError(f"{src} is not a folder; pass a Hugging Face checkpoint folder (config.json, *.safetensors)")
    quant = build_quant(quant) if quant else default_quant()
    model = model_name_for(folder, name)
    out = _models_dir() / f"{model}-{quant}.gguf"
    return convert_checkpoint(folder, out, quant, source=SOURCE_PREFIX + str(folder.resolve()),
                              source_sha256=weights_sha256(folder), name=model)


def find_local(name: str, quant: str | None = None) -> Path | None:
    """The built file of folder model ``name`` (at ``quant``; else the CPU's default, else any), or None."""
    from indexer.models.cache import default_quant

    if name in CATALOGUE or not _NAME.match(name):
        return None
    root = _models_dir()
    for q in [build_quant(quant)] if quant else [default_quant(), *BUILD_QUANTS]:
        path = root / f"{name}-{q}.gguf"
        if path.is_file() and _source(path).startswith(SOURCE_PREFIX):
            return path
    return None


def list_local() -> list[LocalModel]:
    """Every model in the cache built from a folder."""
    out = []
    root = _models_dir()
    for path in sorted(root.glob("*.gguf")) if root.is_dir() else []:
        source = _source(path)
        if not source.startswith(SOURCE_PREFIX) or path.name.endswith(".mmproj.gguf"):
            continue
        stem, _, quant = path.stem.rpartition("-")
        projector = projector_path(path)
        out.append(LocalModel(stem, quant, path, source, path.stat().st_size,
                              projector if projector.is_file() else None))
    return out


def _source(path: Path) -> str:
    from indexer.models.gguf_header import read_header

    try:
        return str(read_header(path, ["indexer.source"]).values.get("indexer.source", ""))
    except (OSError, ValueError):
        return ""
