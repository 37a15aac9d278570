"""A collection's tokenizer behaviour: recorded when it is made, kept until it is reindexed.

A tokenizer change changes vectors, so queries must be tokenized as the collection's documents were. The
behaviour (:mod:`indexer.engine.tokenization`: ``reference``, ``llama.cpp+fixes-1`` or ``llama.cpp``) is written
to the store's metadata (``indexer.tokenizer``) with the model identity; a collection made before it was
recorded has none and keeps llama.cpp's tokenizer as it was. ``indexer status`` shows it, with the behaviour a
reindex would bring.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from indexer.engine.tokenization import META_TOKENIZER, RUNTIME

if TYPE_CHECKING:
    from indexer.engine.adapters import LlamaEmbedder

logger = logging.getLogger(__name__)


def recorded(meta: Mapping[str, str] | None) -> str:
    """The behaviour a collection's documents were tokenized with (``llama.cpp`` when none is recorded)."""
    return str((meta or {}).get(META_TOKENIZER) or RUNTIME)


def describe(meta: Mapping[str, str] | None, collection: str) -> str:
    """What ``indexer status`` says of a collection's tokenizer."""
    mode = recorded(meta)
    if META_TOKENIZER in (meta or {}):
        return mode
    return (f"{mode} (made before tokenizers were recorded: queries keep it; `indexer reindex -c {collection} "
            "--model MODEL` re-embeds with the model's own tokenizer when its file carries one)")


def mode_of(engine: LlamaEmbedder) -> str:
    """The behaviour ``engine`` tokenizes with now."""
    return str(engine.tokenizer_mode)


def meta_for(engine: LlamaEmbedder) -> dict[str, str]:
    """What a new store collection records of the engine's tokenizer."""
    return {META_TOKENIZER: mode_of(engine)}


def from_model_id(model_id: str) -> dict[str, str]:
    """The tokenizer a collection's recorded model id names (``...+tok-reference``), as store meta: what a
    collection whose store was lost was embedded with (its record outlives the store)."""
    _, sep, mode = model_id.rpartition("+tok-")
    return {META_TOKENIZER: mode} if sep else {}


def apply(engine: LlamaEmbedder, meta: Mapping[str, str] | None, collection: str) -> None:
    """Tokenize as the collection's documents were (an old collection: llama.cpp's tokenizer, until reindexed)."""
    want = recorded(meta)
    if engine.tokenizer_mode != want:
        engine.use_tokenizer(want)
        logger.info("collection %s keeps the %s tokenizer its documents were embedded with (reindex for %s)",
                    collection, want, engine.best_tokenizer)
