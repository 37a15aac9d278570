r"""Readers: turn a file's bytes into a :class:`~indexer.types.Document`.

Text readers decode UTF-8 first; a file with a UTF-8/UTF-16/UTF-32 byte-order mark is decoded as such (the BOM
is stripped), and any other file that is not valid UTF-8 is decoded in the encoding charset-normalizer
detects (Latin-1, Windows-1252, Shift-JIS, ...). ``\r\n`` and lone ``\r`` become ``\n``. Chunk spans refer
to ``Document.text`` encoded as UTF-8; for UTF-8 text, Markdown, reStructuredText and code files without a
BOM and with ``\n`` line ends that is exactly the file's bytes, and line numbers always match the file's
lines. Every failure raises :class:`~indexer.errors.SourceError` with the path and a human reason.

:func:`looks_like_text` is the one binary test: the filesystem source skips a file that fails it (code
``binary``) whatever its extension, before any text reader sees it.
"""

from __future__ import annotations

import codecs
import io
import logging
import re

from indexer.plugin_api import Document, SourceError, SourceRef
from indexer.plugin_api.parts import part_done

logger = logging.getLogger(__name__)

_NEWLINES = re.compile(r"\r\n?")
_PRE = "\x01"  # marks preformatted lines between HtmlReader._walk and HtmlReader._tidy


# Checked longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# C0 controls other than tab, newline, vertical tab, form feed, carriage return and escape: text has few.
_CONTROL_BYTES = bytes(set(range(32)) - {9, 10, 11, 12, 13, 27})
_MAX_CONTROL_SHARE = 0.01


def bom_encoding(data: bytes) -> tuple[str, int] | None:
    """``(codec, BOM length)`` when ``data`` starts with a Unicode byte-order mark, else None."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec, len(bom)
    return None


def _utf8_prefix_ok(head: bytes, complete: bool) -> bool:
    try:
        head.decode("utf-8")
        return True
    except UnicodeDecodeError:
        if complete:
            return False
    try:  # a character cut by the end of a sniffed prefix is fine; one cut by the end of the file is not
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def looks_like_text(head: bytes, complete: bool = True) -> bool:
    """Whether ``head`` (a file's first bytes; ``complete`` when it is the whole file) is text: it has a
    Unicode BOM and decodes with it, or it has no NUL byte, few control bytes, and is UTF-8 or in an encoding
    charset-normalizer detects."""
    if not head:
        return True
    found = bom_encoding(head)
    if found is not None:
        codec, skip = found
        body = head[skip:]
        if not complete and codec.startswith("utf-16"):
            body = body[: len(body) // 2 * 2]
        elif not complete and codec.startswith("utf-32"):
            body = body[: len(body) // 4 * 4]
        try:
            codecs.getincrementaldecoder(codec)().decode(body, final=complete and not codec.startswith("utf-8"))
        except UnicodeDecodeError:
            return False
        return True
    if b"\x00" in head:
        return False
    if len(head) - len(head.translate(None, _CONTROL_BYTES)) > _MAX_CONTROL_SHARE * len(head):
        return False
    return _utf8_prefix_ok(head, complete) or _detect(head) is not None


# Legacy encodings tried for text that is not UTF-8, most common first: charset-normalizer often rates
# several equally (Windows-1252 and -1250 on French or German text) and the earlier one wins the tie.
LEGACY_ENCODINGS = (
    "cp1252", "latin_1", "iso8859_15", "cp1250", "iso8859_2", "cp1251", "koi8_r", "cp1253", "cp1254", "cp1255",
    "cp1256", "cp1257", "cp1258", "shift_jis", "cp932", "euc_jp", "gb18030", "big5", "euc_kr", "cp949",
)  # fmt: skip


def _detect(data: bytes) -> str | None:
    """The text of ``data`` in the legacy encoding charset-normalizer finds most likely, or None (not text)."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data, cp_isolation=list(LEGACY_ENCODINGS)))
    if not matches:
        return None
    best_key = min((m.chaos, -m.coherence) for m in matches)
    tied = [m for m in matches if (m.chaos, -m.coherence) == best_key]
    rank = {name: i for i, name in enumerate(LEGACY_ENCODINGS)}
    pick = min(tied, key=lambda m: rank.get(m.encoding, len(rank)))
    logger.debug("decoded as %s (charset-normalizer)", pick.encoding)
    return str(pick)


def decode_text(ref: SourceRef, data: bytes) -> str:
    """Decode a text file (BOM, else UTF-8, else the detected encoding), newlines normalised to ``\n``.

    Raises SourceError when the bytes are not text in any encoding (or not valid in the one their BOM names).
    """
    found = bom_encoding(data)
    if found is not None:
        codec, skip = found
        try:
            text = data[skip:].decode(codec)
        except UnicodeDecodeError as exc:
            raise SourceError(ref.path, f"invalid {codec.upper()} at byte {exc.start + skip} (the file starts with "
                              f"a {codec.upper()} byte-order mark); re-save the file or exclude it") from exc
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            detected = _detect(data) if b"\x00" not in data else None
            if detected is None:
                raise SourceError(ref.path, "not text in UTF-8 or any encoding charset-normalizer recognises "
                                  "(binary content?); convert the file to UTF-8 or exclude it") from None
            text = detected
    if "\r" in text:
        text = _NEWLINES.sub("\n", text)
    return text


def decode_utf8(ref: SourceRef, data: bytes) -> str:
    """Deprecated name of :func:`decode_text` (which also reads BOM-marked UTF-16/32 and legacy encodings)."""
    return decode_text(ref, data)


class _TextBase:
    kind: str = "text"
    extensions: tuple[str, ...] = ()
    reads_text: bool = True  # the source skips files that fail looks_like_text before this reader sees them

    def read(self, ref: SourceRef, data: bytes) -> Document:
        # content_hash is set by the source (sha256 of the raw bytes); a reader used alone leaves it empty.
        return Document(ref=ref, text=decode_text(ref, data), kind=self.kind)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TextReader(_TextBase):
    """Plain text. The filesystem source also uses it for files without (or with an unknown) extension that
    look like UTF-8 text."""

    kind: str = "text"
    extensions: tuple[str, ...] = (".txt", ".text")


class MarkdownReader(_TextBase):
    """Markdown, kept verbatim (the chunker uses its headings and fenced code blocks). Front matter (a YAML block
    between ``---`` lines or a TOML block between ``+++`` lines at the very start: Obsidian, Hugo, Jekyll) is the
    file's metadata (title, author, date, tags and any other scalar field: filterable and shown), not text: the
    block is blanked in ``Document.text`` (spaces, same lines and byte offsets), so no chunk holds it."""

    kind: str = "markdown"
    extensions: tuple[str, ...] = (".md", ".markdown", ".mdown", ".mkd")

    def read(self, ref: SourceRef, data: bytes) -> Document:
        text = decode_text(ref, data)
        found = front_matter(text)
        if found is None:
            return Document(ref=ref, text=text, kind=self.kind)
        end, fields = found
        blank = "".join(ch if ch == "\n" else " " * len(ch.encode("utf-8", "surrogatepass")) for ch in text[:end])
        return Document(ref=ref, text=blank + text[end:], kind=self.kind, metadata=fields)


_FRONT = re.compile(r"\A(?:\ufeff)?(?P<fence>---|\+\+\+)[ \t]*\n(?P<body>.*?)^(?:(?P=fence)|\.\.\.)[ \t]*(?:\n|\Z)",
                    re.DOTALL | re.MULTILINE)
MAX_FRONT_MATTER_CHARS = 32_768
MAX_FRONT_MATTER_FIELDS = 64


def front_matter(text: str) -> tuple[int, tuple[tuple[str, str | int], ...]] | None:
    """(where the block ends, its scalar fields) of a Markdown file's front matter; None when it has none, or
    the block does not read as a mapping (it is then the file's text, as before). Lists of scalars (tags) become
    one value, comma-separated; nested tables are left out."""
    if not text.startswith(("---", "+++", "\ufeff---", "\ufeff+++")):
        return None
    m = _FRONT.match(text[: MAX_FRONT_MATTER_CHARS + 16])
    if m is None:
        return None
    body = m["body"]
    try:
        if m["fence"] == "+++":
            import tomllib

            data = tomllib.loads(body)
        else:
            import yaml

            data = yaml.load(body, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe
    except Exception:  # not YAML/TOML after all: the block stays the file's text
        return None
    if not isinstance(data, dict):
        return None
    fields: list[tuple[str, str | int]] = []
    for key, value in list(data.items())[:MAX_FRONT_MATTER_FIELDS]:
        name = re.sub(r"\s+", "_", str(key).strip().lower())
        scalar = _scalar(value)
        if scalar is None and isinstance(value, (list, tuple)):
            items = [_scalar(v) for v in value[:256]]
            scalar = ", ".join(str(v) for v in items if v is not None) or None
        if name and scalar is not None and scalar != "":
            fields.append((name, scalar))
    return m.end(), tuple(fields)


def _scalar(value: object) -> str | int | None:
    import datetime as _dt

    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return value if abs(value) < 2**63 else str(value)
    if isinstance(value, float):
        return repr(value)  # as text: read back as a number by the field index
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, str):
        return value.strip()
    return None


class RstReader(_TextBase):
    """reStructuredText, kept verbatim (the chunker uses its section titles)."""

    kind: str = "rst"
    extensions: tuple[str, ...] = (".rst", ".rest")


class CodeReader(_TextBase):
    """Source code and configuration files, kept verbatim. For the languages :mod:`plugins.filesystem.syntax` has
    a grammar for, the document carries its syntax outline, so chunks are whole functions and classes (large
    ones cut at inner statements) with the enclosing names as heading; other files are cut at lines."""

    kind: str = "code"

    def read(self, ref: SourceRef, data: bytes) -> Document:
        from plugins.filesystem.syntax import outline

        text = decode_text(ref, data)
        dot = ref.path.rfind(".")
        return Document(ref=ref, text=text, kind=self.kind, outline=outline(text, ref.path[dot:] if dot > 0 else ""))

    extensions: tuple[str, ...] = (
        ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".c", ".h", ".cc", ".cpp",
        ".cxx", ".hpp", ".hh", ".hxx", ".java", ".kt", ".kts", ".scala", ".swift", ".m", ".mm", ".cs", ".fs",
        ".rb", ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".dart", ".ex", ".exs", ".erl", ".hs", ".ml",
        ".clj", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".toml", ".yaml", ".yml", ".json",
        ".jsonl", ".ini", ".cfg", ".conf", ".properties", ".env", ".sql", ".graphql", ".proto", ".css",
        ".scss", ".less", ".vue", ".svelte", ".xml", ".tex", ".cmake", ".gradle", ".mk",
        ".dockerfile", ".tf", ".nix", ".zig", ".v", ".sv", ".vhd", ".asm", ".s",
    )  # fmt: skip


class HtmlReader:
    """HTML: the visible text only (no script, style, template or comments), headings written as Markdown
    ``#`` lines so the chunker keeps the heading path. Spans refer to this extracted text."""

    kind: str = "html"
    extensions: tuple[str, ...] = (".html", ".htm", ".xhtml")
    reads_text: bool = True

    _INVISIBLE = frozenset({"script", "style", "noscript", "template", "head", "svg", "iframe", "object"})
    _BLOCK = frozenset(
        {
            "address", "article", "aside", "blockquote", "br", "dd", "details", "dialog", "div", "dl", "dt",
            "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
            "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tr",
            "td", "th", "ul", "caption", "title", "body", "html", "option",
        }
    )  # fmt: skip
    _PARAGRAPH = frozenset(
        {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table", "ul", "ol", "blockquote", "section",
         "article", "header", "footer", "figure", "dl", "title", "hr"}
    )  # fmt: skip

    def read(self, ref: SourceRef, data: bytes) -> Document:
        from bs4 import BeautifulSoup

        markup = self._decode(ref, data)
        try:
            soup = BeautifulSoup(markup, "html.parser")
        except Exception as exc:  # html.parser is lenient; anything raised here is a broken file
            raise SourceError(ref.path, f"cannot parse HTML ({exc}); fix or exclude the file") from exc
        parts: list[str] = []
        title = " ".join(soup.title.get_text(" ").split()) if soup.title else ""
        if title:
            parts.append(f"# {title}\n\n")
        body = soup.body or soup
        self._walk(body, parts)
        return Document(ref=ref, text=self._tidy("".join(parts)), kind=self.kind)

    def _decode(self, ref: SourceRef, data: bytes) -> str:
        if bom_encoding(data) is not None or _utf8_prefix_ok(data, True):
            return decode_text(ref, data)
        # Legacy pages declare another charset; honour a declared one before guessing.
        from bs4.dammit import UnicodeDammit

        dammit = UnicodeDammit(data, is_html=True)
        if dammit.unicode_markup is not None and not dammit.contains_replacement_characters:
            return _NEWLINES.sub("\n", dammit.unicode_markup)
        try:
            return decode_text(ref, data)
        except SourceError:
            raise SourceError(ref.path, "HTML is neither UTF-8, in its declared charset nor in a detectable "
                              "encoding; convert it to UTF-8") from None

    def _walk(self, node: object, parts: list[str]) -> None:
        from bs4 import Comment, NavigableString, Tag
        from bs4.element import Declaration, Doctype, ProcessingInstruction

        for child in getattr(node, "children", ()):
            if isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                parts.append(re.sub(r"\s+", " ", str(child)))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name.lower()
            if name in self._INVISIBLE or child.get("hidden") is not None:
                continue
            if name in ("h1", "h2", "h3", "h4", "h5", "h6"):
                heading = " ".join(child.get_text(" ").split())
                if heading:
                    parts.append(f"\n\n{'#' * int(name[1])} {heading}\n\n")
                continue
            if name == "pre":  # keep preformatted text as it is, marked so _tidy leaves it alone
                lines = child.get_text().strip("\n").split("\n")
                parts.append("\n\n" + "\n".join(_PRE + line for line in lines) + "\n\n")
                continue
            if name in self._BLOCK:
                self._break(parts, name in self._PARAGRAPH)
            if name in ("td", "th"):
                parts.append(" ")
            self._walk(child, parts)
            if name in self._BLOCK:
                self._break(parts, name in self._PARAGRAPH)

    @staticmethod
    def _break(parts: list[str], blank_line: bool) -> None:
        """End the current line (and leave a blank line after paragraph-like elements)."""
        if blank_line:
            parts.append("\n\n")
        elif not parts or not parts[-1].endswith("\n"):
            parts.append("\n")

    @staticmethod
    def _tidy(text: str) -> str:
        """Strip lines, collapse runs of blank lines to one, keep preformatted lines verbatim."""
        out: list[str] = []
        for raw in text.split("\n"):
            if raw.startswith(_PRE):
                out.append(raw[len(_PRE) :].rstrip())
                continue
            line = raw.strip()
            if line or (out and out[-1]):
                out.append(line)
        while out and not out[-1]:
            out.pop()
        return "\n".join(out) + ("\n" if out else "")

    def __repr__(self) -> str:
        return "HtmlReader()"


_NEEDS_PASSWORD = "encrypted PDF needs a password; decrypt it first or exclude it"


class PdfReader:
    """PDF: the text layer via pypdf, one page after another separated by a blank line, with
    ``Document.page_starts`` (character offsets of each page). Pages without a text layer (scans) are read by
    OCR when it is installed (:mod:`plugins.filesystem.ocr`; options ``ocr``, ``lang``, ``dpi``,
    ``page_timeout``, ``max_pixels``); a PDF with no text layer at all and no OCR is skipped with the install
    command. Encrypted (with a password) or corrupt files raise SourceError."""

    kind: str = "pdf"
    extensions: tuple[str, ...] = (".pdf",)
    isolated = True  # pypdf, pdfium and OCR can take time and memory: the source runs it in its parse worker

    def __init__(self, max_chars: int = 20_000_000, options: dict[str, object] | None = None) -> None:
        from plugins.filesystem.ocr import OcrOptions

        self.max_chars = max_chars
        self.options = dict(options or {})
        self._ocr = OcrOptions(self.options)

    def with_options(self, options: dict[str, object]) -> PdfReader:
        own = {k: v for k, v in options.items() if k not in ("max_unpacked_bytes", "max_unpack_ratio")}
        max_chars = int(own.pop("max_chars", self.max_chars))  # type: ignore[call-overload]
        return PdfReader(max_chars, {**self.options, **own})

    def read(self, ref: SourceRef, data: bytes) -> Document:
        import pypdf
        from pypdf.errors import FileNotDecryptedError, PdfReadError

        try:
            reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted:
                try:
                    decrypted = reader.decrypt("")
                except Exception as exc:
                    raise SourceError(
                        ref.path, f"encrypted PDF cannot be opened ({exc}); decrypt it first or exclude it"
                    ) from exc
                if not decrypted:
                    raise SourceError(ref.path, _NEEDS_PASSWORD)
            pages: list[str] = []
            total = 0
            for number, page in enumerate(reader.pages, start=1):
                try:
                    page_text = page.extract_text() or ""
                except Exception as exc:
                    raise SourceError(
                        ref.path, f"cannot extract text of page {number} ({exc}); the PDF may be corrupt"
                    ) from exc
                page_text = self._clean(page_text)
                total += len(page_text) + 2
                if total > self.max_chars:
                    raise SourceError(
                        ref.path, f"PDF text exceeds {self.max_chars} characters; split or exclude the file"
                    )
                pages.append(page_text)
                part_done()
        except SourceError:
            raise
        except FileNotDecryptedError as exc:
            raise SourceError(ref.path, _NEEDS_PASSWORD) from exc
        except (PdfReadError, Exception) as exc:  # pypdf raises many types (ValueError, KeyError...) on junk
            raise SourceError(ref.path, f"corrupt or unsupported PDF ({type(exc).__name__}: {exc})") from exc
        empty = [i for i, page_text in enumerate(pages) if not page_text.strip()]
        notes: tuple[str, ...] = ()
        if empty:
            from plugins.filesystem.ocr import missing

            if len(empty) > self._ocr.max_pages and self._ocr.enabled and missing() is None:
                notes = (self._ocr.pages_note(self._ocr.max_pages, len(empty), self.kind),)
            pages = self._ocr_pages(ref, data, pages, empty[: self._ocr.max_pages], len(empty) == len(pages))
        starts: list[int] = []
        offset = 0
        for page_text in pages:
            starts.append(offset)
            offset += len(page_text) + 2
        text = "\n\n".join(pages)
        return Document(ref=ref, text=text, kind=self.kind, page_starts=tuple(starts), notes=notes)

    def _ocr_pages(
        self, ref: SourceRef, data: bytes, pages: list[str], empty: list[int], all_scans: bool
    ) -> list[str]:
        """Pages without a text layer, read by OCR; without OCR a PDF that is all scans is skipped."""
        from plugins.filesystem import ocr

        why = ocr.missing() if self._ocr.enabled else "OCR is off (reader_options pdf.ocr = false)"
        if why is not None:
            if all_scans:
                raise SourceError(ref.path, f"scanned PDF without a text layer: {why}", code="missing_library")
            logger.info("%s: %d page(s) without a text layer not read: %s", ref.path, len(empty), why)
            return pages
        try:
            import pypdfium2
        except ImportError:
            raise SourceError(ref.path, f"rendering PDF pages needs pypdfium2; {ocr.INSTALL_HINT}",
                              code="missing_library") from None
        try:
            pdf = pypdfium2.PdfDocument(data)
        except Exception as exc:
            raise SourceError(ref.path, f"cannot render the PDF for OCR ({exc})") from exc
        key = self._ocr.cache.key(data, self._ocr, "pdf")
        cached = self._ocr.cache.get(key) or {}
        out = list(pages)
        try:
            for index in empty:
                if str(index) not in cached:
                    cached[str(index)] = self._clean(ocr.ocr_pdf_page(pdf, index, self._ocr, ref))
                out[index] = cached[str(index)]
        finally:
            pdf.close()
        self._ocr.cache.put(key, cached)
        return out

    @staticmethod
    def _clean(text: str) -> str:
        # Lone surrogates and NULs come out of broken font maps; they cannot be UTF-8 encoded or embedded.
        text = text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")
        text = _NEWLINES.sub("\n", text)
        return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")

    def __repr__(self) -> str:
        return f"PdfReader(max_chars={self.max_chars})"


BUILTIN_READERS: tuple[type, ...] = (TextReader, MarkdownReader, RstReader, CodeReader, HtmlReader, PdfReader)


def default_readers() -> list[TextReader | MarkdownReader | RstReader | CodeReader | HtmlReader | PdfReader]:
    """One instance of every built-in reader."""
    return [TextReader(), MarkdownReader(), RstReader(), CodeReader(), HtmlReader(), PdfReader()]
