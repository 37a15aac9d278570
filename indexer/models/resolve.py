"""Turn what a user typed as a model into a GGUF path."""

from __future__ import annotations

import logging
from pathlib import Path

from indexer.errors import ModelError, ModelUnavailableError
from indexer.models import fetch
from indexer.models.cache import ensure_model, models_dir
from indexer.models.catalogue import CATALOGUE
from indexer.models.local import find_local

logger = logging.getLogger(__name__)

HF_PREFIX = "hf:"


def resolve_model(spec: str) -> Path:
    """Resolve ``spec`` to an existing GGUF file.

    Accepted forms: a catalogue name (``all-MiniLM-L6-v2``, optionally ``all-MiniLM-L6-v2:q8_0``; built on
    first use), a path to a local ``.gguf`` file, or ``hf:<owner>/<repo>/<file.gguf>`` (downloaded with
    huggingface_hub when it is installed and the network allows).
    """
    spec = spec.strip()
    if not spec:
        raise ModelError("empty model name; pass a catalogue name, a .gguf path or hf:<owner>/<repo>/<file>")
    if spec.startswith(HF_PREFIX):
        return _resolve_hf(spec[len(HF_PREFIX):])
    name, _, quant = spec.partition(":")
    if name in CATALOGUE:
        return ensure_model(name, quant or None)
    local = find_local(name, quant or None)
    if local is not None:  # built from a checkpoint folder (`indexer models build --from PATH`)
        return local
    path = Path(spec).expanduser()
    if path.is_file():
        return path.resolve()
    if path.suffix.lower() == ".gguf" or "/" in spec or "\\" in spec:
        raise ModelError(f"model file {spec} does not exist; check the path")
    raise ModelError(f"unknown model {spec!r}; use one of {', '.join(sorted(CATALOGUE))}, a path to a .gguf "
                     "file, or hf:<owner>/<repo>/<file.gguf>")


def _resolve_hf(rest: str) -> Path:
    parts = rest.split("/")
    if len(parts) < 3 or not all(parts):
        raise ModelError(f"hf:{rest}: expected hf:<owner>/<repo>/<file.gguf>")
    repo_id, filename = "/".join(parts[:2]), "/".join(parts[2:])
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ModelError(f"hf:{rest} needs the huggingface_hub package (`pip install huggingface_hub`); or "
                         "download the .gguf file yourself and pass its path") from None
    try:
        local = hf_hub_download(repo_id=repo_id, filename=filename, cache_dir=str(models_dir() / "hf"),
                                local_files_only=fetch.offline())
    except Exception as exc:  # huggingface_hub raises many types (HTTP, offline, not found)
        raise ModelUnavailableError(f"cannot get {filename} from Hugging Face repo {repo_id}: {exc}. Check the "
                                    "name and network access, or pass a local .gguf path") from exc
    return Path(local)
