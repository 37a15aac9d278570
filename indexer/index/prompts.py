"""Query and document prompts: the prefixes some embedding models expect ("query: " / "passage: ", ...).

Where they come from, first match wins, when a collection is created:

1. the settings ``query_prompt`` / ``document_prompt`` (for a user's own model);
2. the model's GGUF metadata ``indexer.prompt.query`` / ``indexer.prompt.document``;
3. the model catalogue entry (``indexer.models.catalogue``; all-MiniLM-L6-v2 uses none).

The collection records the prompts it was created with (store meta ``indexer.query_prompt`` /
``indexer.document_prompt``) and uses those for every later document and query, so queries always match how the
documents were embedded. Asking for other prompts later is a mismatch, as asking for another model is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

META_QUERY = "indexer.query_prompt"  # store meta keys (what the collection was created with)
META_DOCUMENT = "indexer.document_prompt"
GGUF_QUERY = "indexer.prompt.query"  # GGUF metadata keys
GGUF_DOCUMENT = "indexer.prompt.document"


@dataclass(frozen=True)
class Prompts:
    query: str = ""
    document: str = ""
    source: str = "none"  # settings | gguf | catalogue | none | collection

    def meta(self) -> dict[str, str]:
        return {META_QUERY: self.query, META_DOCUMENT: self.document}


def resolve(
    *,
    query_setting: str | None,
    document_setting: str | None,
    gguf_metadata: Mapping[str, str],
    catalogue_query: str = "",
    catalogue_document: str = "",
    profile_query: str = "",
    profile_document: str = "",
) -> Prompts:
    """The prompts for a new collection (see the module docstring for the order)."""
    if query_setting is not None or document_setting is not None:
        return Prompts(query_setting or "", document_setting or "", "settings")
    q, d = gguf_metadata.get(GGUF_QUERY), gguf_metadata.get(GGUF_DOCUMENT)
    if q is not None or d is not None:
        return Prompts(str(q or ""), str(d or ""), "gguf")
    if catalogue_query or catalogue_document:
        return Prompts(catalogue_query, catalogue_document, "catalogue")
    if profile_query or profile_document:  # the family's (indexer.models.profiles), from the GGUF's identity
        return Prompts(profile_query, profile_document, "profile")
    return Prompts()


def recorded(meta: Mapping[str, str]) -> Prompts:
    """The prompts a collection was created with (none for collections made before prompts existed)."""
    return Prompts(str(meta.get(META_QUERY, "")), str(meta.get(META_DOCUMENT, "")), "collection")


def prompted_model_id(model_id: str, prefix: str) -> str:
    """The identity of a model used with ``prefix`` (keys the vector cache): the model's own id without one."""
    if not prefix:
        return model_id
    return f"{model_id}+prompt-{hashlib.sha256(prefix.encode('utf-8')).hexdigest()[:8]}"
