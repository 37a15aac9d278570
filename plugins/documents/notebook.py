"""Jupyter notebooks (.ipynb, format 4), read as JSON with the standard library (nbformat's validation is not
needed to read the cells).

One section per cell (``cell 3 (code)``; fields ``cell``, ``cell_type``): Markdown cells as they are (their
headings give the hit's heading path), code cells in a fenced block in the kernel's language, then, unless the
reader option ``outputs`` is false, the text of their outputs (``text/plain`` results and stream output; images
and HTML are left out). Outputs longer than ``max_output_chars`` (default 20,000) per cell are cut.
"""

from __future__ import annotations

import json
from typing import Any

from indexer.plugin_api import Document, SourceError, SourceRef
from plugins.documents._common import DocumentReader, TextBuilder

DEFAULT_MAX_OUTPUT_CHARS = 20_000


def _source(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ""


class NotebookReader(DocumentReader):
    kind = "ipynb"
    extensions = (".ipynb",)
    reads_text = True  # JSON: the source's binary sniff applies

    def known_options(self) -> tuple[str, ...]:
        return ("outputs", "max_output_chars")

    def read(self, ref: SourceRef, data: bytes) -> Document:
        try:
            nb = json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise SourceError(ref.path, f"not a valid notebook (JSON: {exc})") from None
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise SourceError(ref.path, "not a Jupyter notebook of format 4 (no cells list); convert it with nbconvert")
        outputs = bool(self.options.get("outputs", True))
        cap = int(self.options.get("max_output_chars", DEFAULT_MAX_OUTPUT_CHARS))
        meta: dict[str, Any] = nb["metadata"] if isinstance(nb.get("metadata"), dict) else {}
        kernel: dict[str, Any] = meta["kernelspec"] if isinstance(meta.get("kernelspec"), dict) else {}
        language = str((meta.get("language_info") or {}).get("name") or kernel.get("language") or "")
        out = TextBuilder(self.limits, ref)
        for number, cell in enumerate(nb["cells"], start=1):
            if not isinstance(cell, dict):
                continue
            cell_type = str(cell.get("cell_type", ""))
            source = _source(cell.get("source"))
            out.section(f"cell {number} ({cell_type})", (("cell", number), ("cell_type", cell_type)))
            if cell_type == "code":
                if source.strip():
                    out.block(f"```{language}\n{source.rstrip()}\n```")
                if outputs:
                    text = self._outputs(cell.get("outputs"), cap)
                    if text.strip():
                        out.block(f"Output:\n{text}")
            elif source.strip():
                out.block(source)
        info: dict[str, object] = {"language": language, "cells": len(nb["cells"])}
        if isinstance(meta.get("title"), str):
            info["title"] = meta["title"]
        authors = meta.get("authors")
        if isinstance(authors, list) and authors:
            info["author"] = ", ".join(str(a.get("name", a)) if isinstance(a, dict) else str(a) for a in authors)
        return out.document(ref, self.kind, info)

    @staticmethod
    def _outputs(items: Any, cap: int) -> str:
        parts: list[str] = []
        size = 0
        for output in items if isinstance(items, list) else ():
            if not isinstance(output, dict):
                continue
            kind = output.get("output_type")
            if kind == "stream":
                text = _source(output.get("text"))
            elif kind in ("execute_result", "display_data"):
                data: dict[str, Any] = output["data"] if isinstance(output.get("data"), dict) else {}
                text = _source(data.get("text/plain"))
            elif kind == "error":
                text = f"{output.get('ename', '')}: {output.get('evalue', '')}"
            else:
                continue
            if size + len(text) > cap:
                parts.append(text[: max(0, cap - size)] + " [output cut]")
                break
            parts.append(text.rstrip("\n"))
            size += len(text)
        return "\n".join(p for p in parts if p)
