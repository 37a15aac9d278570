"""RTF, read with striprtf (pure Python): the text of the document, its ``\\info`` title and author as metadata.
striprtf turns each ``\\par`` into a line; lines become paragraphs. RTF has no portable heading markup, so hits
carry no heading path."""

from __future__ import annotations

import re

from indexer.plugin_api import Document, SourceError, SourceRef
from plugins.documents._common import DocumentReader, TextBuilder, need

_INFO = re.compile(rb"\{\\(title|author|subject|operator)\s+([^{}\\]{0,500})\}")


class RtfReader(DocumentReader):
    kind = "rtf"
    extensions = (".rtf",)

    def read(self, ref: SourceRef, data: bytes) -> Document:
        striprtf = need("striprtf.striprtf", "striprtf", ref)
        if not data.lstrip().startswith(b"{\\rtf"):
            raise SourceError(ref.path, "not an RTF file (it does not start with {\\rtf)")
        try:
            text = striprtf.rtf_to_text(data.decode("latin-1"), errors="replace")
        except Exception as exc:
            raise SourceError(ref.path, f"cannot read the RTF file ({type(exc).__name__}: {exc})") from None
        out = TextBuilder(self.limits, ref)
        for line in text.replace("\r\n", "\n").split("\n"):
            out.block(line)
        meta = {m.group(1).decode(): m.group(2).decode("latin-1").strip() for m in _INFO.finditer(data[:65536])}
        if "operator" in meta:
            meta.setdefault("author", meta.pop("operator"))
        return out.document(ref, self.kind, meta)
