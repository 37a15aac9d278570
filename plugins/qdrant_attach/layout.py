"""Where a foreign collection keeps its text, metadata and source path, and how to write a payload like theirs.

Known layouts (what each framework writes, checked against the framework packages themselves):

==============  ==============================================================================================
langchain       ``{"page_content": text, "metadata": {"source": ..., ...}}`` (langchain-qdrant)
llamaindex      flat metadata keys + ``_node_content`` (JSON of the node; its ``text`` is the text) +
                ``_node_type``, ``document_id``, ``doc_id``, ``ref_doc_id`` (llama-index-vector-stores-qdrant)
haystack        ``{"id": ..., "content": text, "blob": null, "meta": {...}, "score": null}`` (qdrant-haystack)
custom          a text field the user names (or we guess), metadata at top level or in a named dict field
==============  ==============================================================================================

Field names are dotted paths into the payload (``metadata.source``). Our one marker field, ``indexer`` (its value
is the attachment's name), goes where the layout keeps metadata, so the framework reads our points as its own
(Haystack, for one, refuses a payload with unknown top-level keys next to ``meta``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from indexer.plugin_api import ConfigError

MARKER = "indexer"
KINDS = ("langchain", "llamaindex", "haystack", "custom")
_TEXT_GUESSES = ("text", "content", "page_content", "document", "chunk", "body", "passage", "contents")
_SOURCE_GUESSES = ("source", "file_path", "path", "filepath", "file_name", "filename", "url", "uri", "doc_id")
_DEFAULTS: dict[str, tuple[str, str | None, str]] = {
    # kind: (text field, metadata field (None = top level), default source key inside the metadata)
    "langchain": ("page_content", "metadata", "source"),
    "llamaindex": ("_node_content", None, "file_path"),
    "haystack": ("content", "meta", "file_path"),
    "custom": ("text", None, "path"),
}
_LLAMA_RESERVED = {"_node_content", "_node_type", "document_id", "doc_id", "ref_doc_id"}
_HAYSTACK_RESERVED = {"id", "content", "blob", "meta", "score", "sparse_embedding", "embedding", "dataframe"}


@dataclass(frozen=True)
class Layout:
    """Where text, metadata and the source path live. ``metadata_field`` None means the top level of the payload."""

    kind: str
    text_field: str
    metadata_field: str | None
    source_field: str | None
    evidence: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text_field": self.text_field,
            "metadata_field": self.metadata_field,
            "source_field": self.source_field,
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Layout:
        return cls(
            str(data["kind"]),
            str(data["text_field"]),
            data.get("metadata_field"),
            data.get("source_field"),
            str(data.get("evidence", "")),
        )

    # -- reading ---------------------------------------------------------------------------------------------
    @property
    def marker_key(self) -> str:
        """The dotted payload key of our marker field."""
        return f"{self.metadata_field}.{MARKER}" if self.metadata_field else MARKER

    def text(self, payload: Mapping[str, Any]) -> str:
        if self.kind == "llamaindex" and self.text_field == "_node_content":
            if isinstance(payload.get("text"), str):
                return str(payload["text"])
            node = _node(payload)
            return str(node.get("text") or "")
        value = get_path(payload, self.text_field)
        return value if isinstance(value, str) else ("" if value is None else str(value))

    def metadata(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        if self.metadata_field:
            value = get_path(payload, self.metadata_field)
            return dict(value) if isinstance(value, Mapping) else {}
        skip = {self.text_field.split(".")[0]}
        if self.kind == "llamaindex":
            skip |= _LLAMA_RESERVED
        return {k: v for k, v in payload.items() if k not in skip}

    def source(self, payload: Mapping[str, Any]) -> str | None:
        if not self.source_field:
            return None
        value = get_path(payload, self.source_field)
        return None if value is None else str(value)

    def is_ours(self, payload: Mapping[str, Any], marker: str | None = None) -> bool:
        value = get_path(payload, self.marker_key)
        return value is not None and (marker is None or value == marker)

    # -- writing ---------------------------------------------------------------------------------------------
    def source_key(self) -> str:
        """The key, inside the metadata, where we write the source path."""
        if self.source_field:
            prefix = f"{self.metadata_field}." if self.metadata_field else ""
            if self.source_field.startswith(prefix) and "." not in self.source_field[len(prefix) :]:
                return self.source_field[len(prefix) :]
        return _DEFAULTS.get(self.kind, _DEFAULTS["custom"])[2]

    def with_written_source(self) -> Layout:
        """This layout with ``source_field`` naming where our points' source path goes when none was found (an
        empty collection): what is written is then also read back."""
        if self.source_field:
            return self
        prefix = f"{self.metadata_field}." if self.metadata_field else ""
        return replace(self, source_field=prefix + self.source_key())

    def nested_source(self) -> str | None:
        """The source field's full dotted path when it is not a plain key of the metadata (``info.origin.path``,
        or a field outside the metadata): the source path is then written there, where it is read from."""
        if not self.source_field:
            return None
        prefix = f"{self.metadata_field}." if self.metadata_field else ""
        return None if prefix + self.source_key() == self.source_field else self.source_field

    def build(self, point_id: str, text: str, metadata: Mapping[str, Any], marker: str) -> dict[str, Any]:
        """A payload in this layout for one of our chunks; ``metadata`` is flat (str, int, float, bool, None)."""
        payload = self._build(point_id, text, metadata, marker)
        nested = self.nested_source()
        if nested is not None:
            source = metadata.get(self.source_key())
            for where in (payload, payload.get(self.metadata_field) if self.metadata_field else None):
                if isinstance(where, dict):
                    where.pop(self.source_key(), None)
            set_path(payload, nested, source)
        return payload

    def _build(self, point_id: str, text: str, metadata: Mapping[str, Any], marker: str) -> dict[str, Any]:
        meta = {**metadata, MARKER: marker}
        if self.kind == "langchain":
            return {"page_content": text, "metadata": meta}
        if self.kind == "haystack":
            return {"id": point_id, "content": text, "blob": None, "meta": meta, "score": None}
        if self.kind == "llamaindex":
            source = str(metadata.get(self.source_key(), ""))
            node: dict[str, Any] = {
                "id_": point_id,
                "embedding": None,
                "metadata": meta,
                "excluded_embed_metadata_keys": [],
                "excluded_llm_metadata_keys": [],
                "relationships": {},
                "metadata_template": "{key}: {value}",
                "metadata_separator": "\n",
                "text": text,
                "mimetype": "text/plain",
                "start_char_idx": None,
                "end_char_idx": None,
                "text_template": "{metadata_str}\n\n{content}",
                "class_name": "TextNode",
            }
            return {
                **meta,
                "_node_content": json.dumps(node),
                "_node_type": "TextNode",
                "document_id": source,
                "doc_id": source,
                "ref_doc_id": source,
            }
        payload: dict[str, Any] = {}
        set_path(payload, self.text_field, text)
        if self.metadata_field:
            set_path(payload, self.metadata_field, meta)
        else:
            for key, value in meta.items():
                payload.setdefault(key, value)
        return payload


def get_path(payload: Mapping[str, Any], dotted: str) -> Any:
    value: Any = payload
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def set_path(payload: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = payload
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def _node(payload: Mapping[str, Any]) -> dict[str, Any]:
    raw = payload.get("_node_content")
    if not isinstance(raw, str):
        return {}
    try:
        node = json.loads(raw)
    except ValueError:
        return {}
    return node if isinstance(node, dict) else {}


# -- detection -------------------------------------------------------------------------------------------------
def classify(payload: Mapping[str, Any]) -> str | None:
    """The framework that wrote this payload, or None."""
    if isinstance(payload.get("_node_content"), str):
        return "llamaindex"
    if isinstance(payload.get("page_content"), str):
        return "langchain"
    if isinstance(payload.get("content"), str) and "meta" in payload:
        return "haystack"
    return None


def detect(payloads: Sequence[Mapping[str, Any]], marker_excluded: bool = True) -> tuple[Layout, dict[str, int]]:
    """The layout most sampled payloads follow, with per-kind counts (``unknown`` for none of the frameworks)."""
    sample = [p for p in payloads if not (marker_excluded and _has_marker(p))] or list(payloads)
    counts = Counter(classify(p) or "unknown" for p in sample)
    if not sample:
        return Layout("custom", "text", None, None, "empty collection: nothing to detect; defaults used"), {}
    kind, n = counts.most_common(1)[0]
    if kind == "unknown":
        text_field = _guess_text_field(sample)
        dicts = sum(isinstance(p.get("metadata"), Mapping) for p in sample)
        metadata_field = "metadata" if dicts * 2 > len(sample) else None
        evidence = f"{n}/{len(sample)} sampled payloads match no framework; text guessed in {text_field!r}"
        kind = "custom"
    else:
        text_field, metadata_field, _ = _DEFAULTS[kind]
        evidence = f"{n}/{len(sample)} sampled payloads have the {kind} layout"
    layout = Layout(kind, text_field, metadata_field, None, evidence)
    source = _guess_source_field(layout, sample)
    return replace(layout, source_field=source), dict(counts)


def _has_marker(payload: Mapping[str, Any]) -> bool:
    kind = classify(payload)
    meta_field = _DEFAULTS[kind][1] if kind else None
    if meta_field and isinstance(payload.get(meta_field), Mapping) and MARKER in payload[meta_field]:
        return True
    return MARKER in payload


def _guess_text_field(sample: Sequence[Mapping[str, Any]]) -> str:
    strings: Counter[str] = Counter()
    lengths: Counter[str] = Counter()
    for p in sample:
        for key, value in p.items():
            if isinstance(value, str):
                strings[key] += 1
                lengths[key] += len(value)
    for name in _TEXT_GUESSES:
        if strings[name] * 2 > len(sample):
            return name
    if lengths:
        return lengths.most_common(1)[0][0]
    return "text"


def _guess_source_field(layout: Layout, sample: Sequence[Mapping[str, Any]]) -> str | None:
    metas = [layout.metadata(p) for p in sample]
    prefix = f"{layout.metadata_field}." if layout.metadata_field else ""
    for key in _SOURCE_GUESSES:
        if sum(isinstance(m.get(key), str) for m in metas) * 2 > len(metas):
            return prefix + key
    return None


def with_overrides(
    layout: Layout,
    *,
    kind: str | None = None,
    text_field: str | None = None,
    metadata_field: str | None = None,
    source_field: str | None = None,
) -> Layout:
    """The detected layout with the user's choices applied (each one replaces our guess)."""
    if kind is not None:
        if kind not in KINDS:
            raise ConfigError(f"unknown payload layout {kind!r}; use one of {', '.join(KINDS)}")
        if kind != layout.kind:
            text, meta, source = _DEFAULTS[kind]
            prefix = f"{meta}." if meta else ""
            layout = Layout(kind, text, meta, prefix + source, "layout chosen by the user")
    if text_field is not None:
        layout = replace(layout, text_field=text_field, evidence=layout.evidence + "; text field chosen by the user")
    if metadata_field is not None:
        layout = replace(layout, metadata_field=metadata_field or None)
    if source_field is not None:
        layout = replace(layout, source_field=source_field or None)
    return layout
