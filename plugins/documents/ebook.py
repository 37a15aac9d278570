"""EPUB e-books, read with the standard library's zipfile, defusedxml (the container and package files) and
Beautiful Soup's html.parser (the chapters: no entity expansion, no network).

The chapters in spine order, each a section (``chapter 2: The keeper``; fields ``chapter``, ``title``, ``file``)
written as Markdown: headings (the hit's heading path inside the chapter), paragraphs, list items, tables as
rows with their header. Metadata: title, author, language, date, publisher.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from indexer.plugin_api import Document, SourceError, SourceRef
from plugins.documents._common import DocumentReader, TextBuilder, html_to_markdown, need, open_zip

_CONTAINER_NS = "urn:oasis:names:tc:opendocument:xmlns:container"
_OPF_NS = "http://www.idpf.org/2007/opf"
_DC_NS = "http://purl.org/dc/elements/1.1/"
_XHTML_TYPES = ("application/xhtml+xml", "text/html")


class EpubReader(DocumentReader):
    kind = "epub"
    extensions = (".epub",)

    def read(self, ref: SourceRef, data: bytes) -> Document:
        defused = need("defusedxml.ElementTree", "defusedxml", ref)
        archive = open_zip(ref, data, self.limits, "EPUB book")

        def xml(name: str) -> Any:
            try:
                return defused.fromstring(archive.read(name))
            except KeyError:
                raise SourceError(ref.path, f"not a valid EPUB ({name} is missing)") from None
            except Exception as exc:
                raise SourceError(ref.path, f"refused or broken XML in {name} ({type(exc).__name__}: {exc})") from None

        names = set(archive.namelist())
        if "META-INF/encryption.xml" in names and b"EncryptedData" in archive.read("META-INF/encryption.xml"):
            raise SourceError(ref.path, "DRM-protected (encrypted) EPUB; not readable", code="encrypted")
        container = xml("META-INF/container.xml")
        rootfile = container.find(f".//{{{_CONTAINER_NS}}}rootfile")
        if rootfile is None or not rootfile.get("full-path"):
            raise SourceError(ref.path, "not a valid EPUB (container.xml names no package file)")
        opf_path = rootfile.get("full-path")
        opf = xml(opf_path)
        base = posixpath.dirname(opf_path)
        manifest = {
            item.get("id"): (item.get("href"), item.get("media-type"), item.get("properties") or "")
            for item in opf.iter(f"{{{_OPF_NS}}}item")
        }
        meta: dict[str, object] = {}
        for name, tag in (("title", "title"), ("author", "creator"), ("language", "language"), ("date", "date"),
                          ("publisher", "publisher")):  # fmt: skip
            node = opf.find(f".//{{{_DC_NS}}}{tag}")
            if node is not None and (node.text or "").strip():
                meta[name] = node.text.strip()
        out = TextBuilder(self.limits, ref)
        chapter = 0
        for itemref in opf.iter(f"{{{_OPF_NS}}}itemref"):
            href, media, properties = manifest.get(itemref.get("idref"), (None, None, ""))
            if not href or media not in _XHTML_TYPES or "nav" in properties.split():
                continue  # the navigation page repeats the table of contents
            name = posixpath.normpath(posixpath.join(base, href))
            try:
                page = archive.read(name)
            except KeyError:
                continue
            chapter += 1
            mark = len(out.sections)
            out.section(f"chapter {chapter}", (("chapter", chapter), ("file", href)))
            title = html_to_markdown(out, page)
            if not title:
                found = re.search(rb"<title[^>]*>([^<]{1,200})</title>", page)
                title = " ".join(found.group(1).decode("utf-8", "replace").split()) if found else ""
            if title and len(out.sections) > mark:
                section = out.sections[mark]
                out.sections[mark] = type(section)(
                    section.start, f"chapter {chapter}: {title}", (*section.fields, ("title", title)), section.metadata
                )
        meta["chapters"] = chapter
        return out.document(ref, self.kind, meta)
