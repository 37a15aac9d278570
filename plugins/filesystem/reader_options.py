"""Readers configured from the settings: one concern, ``settings.reader_options`` and the container limits
handed to every reader that takes options (the filesystem source builds its readers with it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from indexer.plugin_api import ConfigError, Reader

if TYPE_CHECKING:
    from indexer.plugin_api import Settings


def configure_readers(readers: Sequence[Reader], settings: Settings) -> list[Reader]:
    """The readers with their options: the container limits (``max_unpacked_bytes``, ``max_unpack_ratio``) for
    every reader that takes options (``with_options``), and ``settings.reader_options[kind]`` for its own."""
    options = dict(settings.reader_options)
    out: list[Reader] = []
    for reader in readers:
        own = options.pop(reader.kind, None)
        configure = getattr(reader, "with_options", None)
        if configure is None:
            if own:
                raise ConfigError(f"reader_options for {reader.kind!r}: that reader takes no options")
            out.append(reader)
            continue
        limits: dict[str, object] = {
            "max_unpacked_bytes": settings.max_unpacked_bytes,
            "max_unpack_ratio": settings.max_unpack_ratio,
        }
        if reader.kind in ("image", "pdf"):  # OCR text is cached by content hash in the data directory
            limits["cache_dir"] = str(Path(settings.data_dir).expanduser() / "ocr-cache")
        if getattr(reader, "reads_media", False):  # asked only of readers that say they attach media
            limits["media"] = bool(getattr(settings, "embed_media", False))
        try:
            out.append(configure({**limits, **(own or {})}))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"reader_options for {reader.kind!r}: {exc}") from exc
    if options:
        kinds = ", ".join(sorted(r.kind for r in readers))
        raise ConfigError(f"reader_options name unknown reader kind(s) {', '.join(sorted(options))}; kinds: {kinds}")
    return out
