"""Filesystem source plugin: roots, ignore rules and readers for text, Markdown, reST, code, HTML and PDF."""

from plugins.filesystem.readers import (
    CodeReader,
    HtmlReader,
    MarkdownReader,
    PdfReader,
    RstReader,
    TextReader,
    decode_utf8,
    default_readers,
)
from plugins.filesystem.source import DEFAULT_MAX_FILE_SIZE, FilesystemSource, ScanProblem

__all__ = [
    "DEFAULT_MAX_FILE_SIZE",
    "CodeReader",
    "FilesystemSource",
    "HtmlReader",
    "MarkdownReader",
    "PdfReader",
    "RstReader",
    "ScanProblem",
    "TextReader",
    "decode_utf8",
    "default_readers",
]
