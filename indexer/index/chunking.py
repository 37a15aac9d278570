"""Token-aware chunking: documents -> chunks that fit the embedding model, counted by its own tokenizer.

:class:`TokenChunker` cuts a :class:`~indexer.types.Document` into :class:`~indexer.types.Chunk` values that
never exceed ``max_tokens`` as counted by ``TokenCounter.count_tokens`` (special tokens included), so no
silent truncation happens later. How:

1. The text is split into blocks: paragraphs (runs of non-blank lines), Markdown fenced code blocks (kept
   whole, blank lines included), YAML front matter, and Markdown / reStructuredText / HTML headings (HTML
   headings arrive as Markdown ``#`` lines from the reader). A heading starts a new section; the chunk's
   ``heading`` is the path of section titles above it.
2. Every block is counted once. A block too large on its own is split at lines; a line too large is split
   at the last space that fits (characters as a last resort), found by a galloping/binary search of exact
   counts on pieces about the size of one chunk.
3. Blocks are packed greedily into chunks by the sum of their counts (an estimate, since tokenizers are
   not exactly additive), never across a section or PDF page boundary (a section holding only headings is
   merged with the next one). Each chunk's text is then counted exactly once and shrunk by a block if the
   estimate was short. The work is linear in the text size: no growing string is re-tokenised.
4. A chunk that follows a size cut (same section) starts with an overlap: a tail of the previous chunk,
   starting at a word, of at most (and close to) ``overlap_tokens`` tokens.

Spans: ``start_byte``/``end_byte`` index ``doc.text.encode("utf-8")`` and ``chunk.text`` is exactly that
slice decoded (leading blank lines and trailing whitespace are trimmed off the span, indentation kept).
Lines are 1-based and inclusive; ``page`` is the PDF page where the chunk starts. Output is deterministic.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from indexer.core.pulled import Pulled
from indexer.errors import ConfigError
from indexer.ports import TokenCounter
from indexer.types import Chunk, Document, OutlineNode

logger = logging.getLogger(__name__)

DEFAULT_OVERLAP_TOKENS = 32
MIN_MAX_TOKENS = 8
META_CHUNK_TOKENS = "chunk_tokens"  # store collection metadata: the chunk size the collection was made with

_MD_KINDS = frozenset({"markdown", "html"})
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_SENTENCE_END = re.compile(r"[.!?;:][\"')\]]?(?=\s)")
_MAX_PROBES = 24
_HUGE_CHARS_PER_TOKEN = 32  # spans longer than max_tokens * this are split before any whole count
_CLOSERS = re.compile(r"(?:[\s\})\];,]|\bend\b|\bfi\b|\bdone\b|\besac\b)*\Z")
_RST_ADORN = re.compile(r"^([!-/:-@\[-`{-~])\1+[ \t]*$")


@dataclass(frozen=True)
class _Block:
    start: int  # character offsets in the document text, end exclusive
    end: int
    level: int = 0  # heading level (1 = top) for heading blocks, 0 otherwise
    title: str = ""


_Span = tuple[int, int, int, tuple[str, ...]]  # a chunk's (start, end) characters, its tokens and its heading


@dataclass
class _Node:
    """A unit of a code outline while the chunker cuts it (its children in text order)."""

    start: int
    end: int
    heading: tuple[str, ...]
    children: list[_Node] = field(default_factory=list)


@dataclass(frozen=True)
class _Segment:
    """A trimmed piece of text the packer places whole: a block, or a line / part of an oversized block."""

    start: int
    end: int
    n: int  # tokens without the special tokens
    section: int
    page: int
    heading: tuple[str, ...]
    is_heading: bool
    part: int = 0  # 1-based index of the Document.sections entry it lies in (0: none, or before the first)


class _TextIndex:
    """Character offset -> UTF-8 byte offset and 1-based line, without per-call O(n) work."""

    _STEP = 4096

    def __init__(self, text: str) -> None:
        self.text = text
        self.ascii = text.isascii()
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.checkpoints: list[int] = []
        if not self.ascii:
            total = 0
            for k in range(0, len(text), self._STEP):
                self.checkpoints.append(total)
                total += len(text[k : k + self._STEP].encode("utf-8", "surrogatepass"))
            self.checkpoints.append(total)

    def byte(self, char: int) -> int:
        if self.ascii:
            return char
        k = char // self._STEP
        return self.checkpoints[k] + len(self.text[k * self._STEP : char].encode("utf-8", "surrogatepass"))

    def line(self, char: int) -> int:
        return bisect.bisect_left(self.newlines, char) + 1


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of every line, newline excluded."""
    spans: list[tuple[int, int]] = []
    start = 0
    for line in text.split("\n"):
        end = start + len(line)
        spans.append((start, end))
        start = end + 1
    return spans


def _split_blocks(text: str, kind: str) -> list[_Block]:
    lines = _lines(text)
    if kind in _MD_KINDS:
        return _markdown_blocks(text, lines)
    if kind == "rst":
        return _rst_blocks(text, lines)
    return _paragraph_blocks(text, lines)


def _paragraph_blocks(text: str, lines: list[tuple[int, int]]) -> list[_Block]:
    blocks: list[_Block] = []
    para_start: int | None = None
    para_end = 0
    for start, end in lines:
        if text[start:end].strip():
            if para_start is None:
                para_start = start
            para_end = end
        elif para_start is not None:
            blocks.append(_Block(para_start, para_end))
            para_start = None
    if para_start is not None:
        blocks.append(_Block(para_start, para_end))
    return blocks


def _markdown_blocks(text: str, lines: list[tuple[int, int]]) -> list[_Block]:
    blocks: list[_Block] = []
    para: list[tuple[int, int]] = []

    def flush() -> None:
        if para:
            blocks.append(_Block(para[0][0], para[-1][1]))
            para.clear()

    i = 0
    n = len(lines)
    if n > 1 and text[lines[0][0] : lines[0][1]].rstrip() == "---":  # YAML front matter
        for k in range(1, n):
            if text[lines[k][0] : lines[k][1]].rstrip() in ("---", "..."):
                blocks.append(_Block(lines[0][0], lines[k][1]))
                i = k + 1
                break
    while i < n:
        start, end = lines[i]
        line = text[start:end]
        if not line.strip():
            flush()
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker = fence.group(1)
            close = re.compile(r"^ {0,3}" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}[ \t]*$")
            k = i + 1
            while k < n and not close.match(text[lines[k][0] : lines[k][1]]):
                k += 1
            last = min(k, n - 1)
            blocks.append(_Block(start, lines[last][1]))
            i = last + 1
            continue
        atx = _ATX.match(line)
        if atx:
            flush()
            title = _ATX_CLOSE.sub("", atx.group(2) or "").strip()
            blocks.append(_Block(start, end, level=len(atx.group(1)), title=title))
            i += 1
            continue
        setext = _SETEXT.match(line)
        if setext and len(para) == 1:
            title = text[para[0][0] : para[0][1]].strip()
            blocks.append(_Block(para[0][0], end, level=1 if setext.group(1)[0] == "=" else 2, title=title))
            para.clear()
            i += 1
            continue
        para.append((start, end))
        i += 1
    flush()
    return blocks


def _rst_blocks(text: str, lines: list[tuple[int, int]]) -> list[_Block]:
    blocks: list[_Block] = []
    para: list[tuple[int, int]] = []
    styles: dict[tuple[str, bool], int] = {}  # adornment style -> level, in order of first use

    def flush() -> None:
        if para:
            blocks.append(_Block(para[0][0], para[-1][1]))
            para.clear()

    def title_ok(title: str, adornment: str) -> bool:
        stripped = title.strip()
        return bool(stripped) and not _RST_ADORN.match(title) and len(adornment.rstrip()) >= min(len(stripped), 3)

    def level(char: str, overline: bool) -> int:
        return styles.setdefault((char, overline), len(styles) + 1)

    def line_at(k: int) -> str:
        return text[lines[k][0] : lines[k][1]]

    i = 0
    n = len(lines)
    while i < n:
        start, end = lines[i]
        line = line_at(i)
        if not line.strip():
            flush()
            i += 1
            continue
        over = _RST_ADORN.match(line)
        if over and not para and i + 2 < n:  # overline + title + underline
            under = _RST_ADORN.match(line_at(i + 2))
            if under and under.group(1) == over.group(1) and title_ok(line_at(i + 1), line_at(i + 2)):
                title = line_at(i + 1).strip()
                blocks.append(_Block(start, lines[i + 2][1], level=level(over.group(1), True), title=title))
                i += 3
                continue
        if not para and not line[0].isspace() and not over and i + 1 < n:  # title + underline
            under = _RST_ADORN.match(line_at(i + 1))
            if under and title_ok(line, line_at(i + 1)):
                blocks.append(_Block(start, lines[i + 1][1], level=level(under.group(1), False), title=line.strip()))
                i += 2
                continue
        para.append((start, end))
        i += 1
    flush()
    return blocks


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop trailing whitespace and leading blank lines (keeping the first line's indentation)."""
    while end > start and text[end - 1].isspace():
        end -= 1
    first = start
    while first < end and text[first].isspace():
        first += 1
    newline = text.rfind("\n", start, first)
    return (newline + 1 if newline != -1 else start), end


class TokenChunker:
    """Cuts documents into chunks of at most ``max_tokens`` model tokens (see the module docstring).

    ``max_tokens`` defaults to ``counter.max_tokens`` and may not exceed it; ``overlap_tokens`` must be
    below half of ``max_tokens``.
    """

    def __init__(
        self,
        counter: TokenCounter,
        max_tokens: int | None = None,
        overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    ) -> None:
        model_limit = int(counter.max_tokens)
        limit = model_limit if max_tokens is None else int(max_tokens)
        if limit > model_limit:
            raise ConfigError(
                f"chunk max_tokens {limit} exceeds the model's limit of {model_limit} tokens; "
                f"set it to {model_limit} or less"
            )
        if limit < MIN_MAX_TOKENS:
            raise ConfigError(f"chunk max_tokens {limit} is too small; use at least {MIN_MAX_TOKENS}")
        if overlap_tokens < 0 or overlap_tokens >= limit // 2:
            raise ConfigError(
                f"overlap_tokens {overlap_tokens} must be between 0 and {limit // 2 - 1} (below half of "
                f"max_tokens {limit})"
            )
        self.counter = counter
        self.max_tokens = limit
        self.overlap_tokens = overlap_tokens
        self._specials: int | None = None

    def __repr__(self) -> str:
        return f"TokenChunker(max_tokens={self.max_tokens}, overlap_tokens={self.overlap_tokens})"

    # ------------------------------------------------------------------------------------------ counting

    def _count(self, text: str) -> int:
        return int(self.counter.count_tokens(text))

    @property
    def specials(self) -> int:
        """Tokens the model adds around every text (BOS/CLS, EOS/SEP), measured on the empty string."""
        if self._specials is None:
            try:
                self._specials = max(0, self._count(""))
            except Exception:  # a counter may refuse empty input; estimates only get a little looser
                self._specials = 0
            self._specials = min(self._specials, self.max_tokens - MIN_MAX_TOKENS // 2)
        return self._specials

    def _fits(self, text: str, limit: int) -> bool:
        return self._count(text) <= limit

    # ----------------------------------------------------------------------------------------- chunking

    def chunk(self, doc: Document) -> Iterator[Chunk]:
        text = doc.text
        if not text or text.isspace():
            return
        index = _TextIndex(text)
        page_starts = list(doc.page_starts)
        part_starts = [s.start for s in doc.sections]
        if doc.outline:
            spans: Iterator[tuple[int, int, int, tuple[str, ...]]] = iter(self._outline_spans(text, doc.outline))
        else:
            blocks = _split_blocks(text, doc.markup or doc.kind)
            # code without a syntax tree: an overlap starts at a line, so no chunk starts mid-line
            spans = self._pack(text, self._segments(text, blocks, page_starts, part_starts), doc.kind == "code")
        base = dict(doc.metadata)
        for number, (start, end, n_tokens, heading) in enumerate(spans):
            part = _page_of(part_starts, start) if part_starts and start >= part_starts[0] else None
            section = doc.sections[part - 1] if part else None
            metadata = base | dict(section.metadata) if section is not None and section.metadata else base
            yield Chunk(
                path=doc.ref.path,
                index=number,
                text=text[start:end],
                start_byte=index.byte(start),
                end_byte=index.byte(end),
                start_line=index.line(start),
                end_line=index.line(end - 1),
                n_tokens=n_tokens,
                page=_page_of(page_starts, start),
                heading=heading,
                locator=section.locator if section is not None else "",
                location=section.fields if section is not None else (),
                metadata=tuple(metadata.items()),
            )

    def _segments(
        self, text: str, blocks: list[_Block], page_starts: list[int], part_starts: list[int] | None = None
    ) -> Iterator[_Segment]:
        """The blocks' segments, counted as the packer asks for them (a large file's first chunk comes without
        tokenizing the whole file first)."""
        path: list[tuple[int, str]] = []
        section = 0
        part = 0
        for block in blocks:
            if part_starts:  # a new Document section: a hard boundary, and its heading path starts afresh
                block_part = bisect.bisect_right(part_starts, block.start)
                if block_part != part:
                    part = block_part
                    path = []
                    section += 1
            if block.level:
                while path and path[-1][0] >= block.level:
                    path.pop()
                path.append((block.level, block.title))
                section += 1
            heading = tuple(title for _, title in path)
            start, end = _trim(text, block.start, block.end)
            if start >= end:
                continue
            for piece_start, piece_end, n in self._fit(text, start, end):
                page = _page_of(page_starts, piece_start) or 0
                yield _Segment(piece_start, piece_end, n, section, page, heading, bool(block.level), part)

    # ------------------------------------------------------------------------------- code by syntax tree

    def _outline_spans(self, text: str, outline: tuple[OutlineNode, ...]) -> list[_Span]:
        """Source code along its syntax tree (``Document.outline``): a unit (class, function, statement) that fits
        is one chunk; a larger one is cut into its header, its children and the code between them, in order:
        each named child (a method, a nested class) whole in a chunk of its own when it fits (with the code just
        above it, such as imports), else cut the same way; statements and the code between children packed
        together; plain lines where no child is left. The heading is the enclosing names of the unit a chunk
        holds. Chunks start and end at line boundaries (only a line longer than a chunk is cut inside); no
        overlap."""
        root = _Node(0, len(text), ())
        stack = [root]
        for node in sorted(outline, key=lambda n: (n.start, -n.end)):
            while len(stack) > 1 and node.start >= stack[-1].end:
                stack.pop()
            parent = stack[-1]
            start, end = max(node.start, parent.start), min(node.end, parent.end)
            if start >= end or (start, end) == (parent.start, parent.end) and parent is not root:
                continue  # empty, or the same span as its parent (a decorated definition and its definition)
            child = _Node(start, end, node.heading)
            parent.children.append(child)
            stack.append(child)
        out: list[_Span] = []
        self._emit_node(text, root, out)
        return out

    def _emit_node(self, text: str, node: _Node, out: list[_Span]) -> None:
        a, b = _trim(text, node.start, node.end)
        if a >= b:
            return
        if b - a <= self.max_tokens * _HUGE_CHARS_PER_TOKEN:
            count = self._count(text[a:b])
            if count <= self.max_tokens:
                out.append((a, b, count, node.heading))
                return
        budget = self.max_tokens - self.specials
        pack: list[tuple[int, int, int, tuple[str, ...] | None]] = []  # heading None: code between children

        def flush() -> None:
            carry: list[tuple[int, int, int, tuple[str, ...] | None]] = []
            while pack:
                lo, hi = _trim(text, pack[0][0], pack[-1][1])
                n = self._count(text[lo:hi])
                if n <= self.max_tokens or len(pack) == 1:
                    children = [p[3] for p in pack if p[3] is not None]
                    out.append((lo, hi, n, children[0] if len(children) == 1 else node.heading))
                    break
                carry.insert(0, pack.pop())  # the estimate was short: the last items start the next chunk
            pack[:] = carry

        def add(start: int, end: int, n: int, heading: tuple[str, ...] | None) -> None:
            if pack and sum(p[2] for p in pack) + n > budget:
                flush()
            pack.append((start, end, n, heading))

        def add_code(start: int, end: int) -> None:
            lo, hi = _trim(text, start, end)
            if lo >= hi:
                return
            if not pack and out and _CLOSERS.match(text, lo, hi) and out[-1][1] <= lo:
                # a closing line (``}``, ``end``) after a unit that was cut: it ends that chunk, not one of its own
                last = out[-1]
                n = self._count(text[last[0] : hi])
                if n <= self.max_tokens:
                    out[-1] = (last[0], hi, n, last[3])
                    return
            for piece_start, piece_end, n in self._fit(text, lo, hi):
                add(piece_start, piece_end, n, None)

        cursor = node.start
        for child in node.children:
            add_code(cursor, child.start)
            cursor = child.end
            lo, hi = _trim(text, child.start, child.end)
            if lo >= hi:
                continue
            n = self._count(text[lo:hi]) if hi - lo <= self.max_tokens * _HUGE_CHARS_PER_TOKEN else self.max_tokens + 1
            definition = child.heading != node.heading  # a named unit: a chunk of its own (with the code above it)
            if definition and any(p[3] is not None for p in pack):
                while pack:
                    flush()
            if n <= self.max_tokens:
                add(lo, hi, n - self.specials, child.heading)
                if definition:
                    while pack:
                        flush()
            else:
                while pack:
                    flush()
                self._emit_node(text, child, out)
        add_code(cursor, node.end)
        while pack:
            flush()

    def _fit(self, text: str, start: int, end: int) -> list[tuple[int, int, int]]:
        """The trimmed span as pieces that each fit: whole, else by lines, else by words/characters.
        Spans far longer than a chunk are not counted whole (tokenizing megabytes at once is slow)."""
        huge = self.max_tokens * _HUGE_CHARS_PER_TOKEN
        if end - start <= huge:
            count = self._count(text[start:end])
            if count <= self.max_tokens:
                return [(start, end, count - self.specials)]
        pieces: list[tuple[int, int, int]] = []
        for line_start, line_end in _lines(text[start:end]):
            a, b = _trim(text, start + line_start, start + line_end)
            if a >= b:
                continue
            count = self._count(text[a:b]) if b - a <= huge else (b - a) // 4 + self.specials
            if count <= self.max_tokens:
                pieces.append((a, b, count - self.specials))
            else:
                pieces.extend(self._split_long(text, a, b, count))
        return pieces

    def _split_long(self, text: str, start: int, end: int, count: int) -> list[tuple[int, int, int]]:
        """Split one over-long line (of ``count`` tokens) into pieces that fit.

        For each piece the longest fitting prefix is found by interpolation search on exact counts of
        piece-sized strings (about four counts a piece), then the cut moves back to a sentence end in its
        last quarter, else a space in its second half, else stays between characters. Pieces leave room
        for the overlap the packer puts in front of them."""
        limit = self.max_tokens - self.overlap_tokens
        specials = self.specials
        chars_per_token = max(0.25, (end - start) / max(1, count - specials))
        close_enough = max(1, limit // 32)  # a prefix this close to the limit is taken without more probes
        pieces: list[tuple[int, int, int]] = []
        cur = start
        while cur < end:
            while cur < end and text[cur].isspace():
                cur += 1
            if cur >= end:
                break
            good, good_n = cur, specials  # the longest prefix end known to fit, and its count
            bad, bad_n = end + 1, 0  # the shortest prefix end known not to fit (end + 1: none yet)
            probe = min(end, cur + max(1, int((limit - specials) * chars_per_token)))
            for _ in range(_MAX_PROBES):
                n = self._count(text[cur:probe])
                if n <= limit:
                    good, good_n = probe, n
                    if probe >= end or n >= limit - close_enough:
                        break
                else:
                    bad, bad_n = probe, n
                if bad <= end:
                    if bad - good <= max(4, (bad - cur) // 64):
                        break
                    fraction = (limit - good_n) / max(1, bad_n - good_n)
                    probe = min(max(good + int((bad - good) * fraction), good + 1), bad - 1)
                else:  # everything so far fits: grow by the observed characters per token
                    factor = min(4.0, (limit - specials) / max(1, n - specials) * 1.05)
                    probe = min(end, max(cur + int((probe - cur) * factor) + 1, probe + 1))
            if good == cur:  # not even the shortest probe fit; a single character always does
                good = cur + 1
            cut = self._cut_point(text, cur, good) if good < end else good
            piece_end = cut
            while piece_end > cur and text[piece_end - 1].isspace():
                piece_end -= 1
            n = self._count(text[cur:piece_end])
            if n > limit:  # the tokenizer is not monotonic here; fall back to the prefix that fit
                piece_end = cut = good
                n = self._count(text[cur:piece_end])
            pieces.append((cur, piece_end, n - specials))
            if n > specials:
                chars_per_token = max(0.25, (piece_end - cur) / (n - specials))
            cur = cut
        return pieces

    @staticmethod
    def _cut_point(text: str, start: int, end: int) -> int:
        """Where to end a piece that may not go past ``end``: after a sentence end in the last quarter, else
        at a space in the second half, else at ``end``."""
        quarter = end - (end - start) // 4
        last = None
        for last in _SENTENCE_END.finditer(text, quarter, end):  # noqa: B007 - the last match is wanted
            pass
        if last is not None:
            return last.end()
        middle = start + (end - start) // 2
        space = max(text.rfind(" ", middle, end + 1), text.rfind("\t", middle, end + 1))
        return space if space > start else end

    def _pack(
        self, text: str, produced: Iterable[_Segment], line_overlap: bool = False
    ) -> Iterator[tuple[int, int, int, tuple[str, ...]]]:
        budget = self.max_tokens - self.specials
        segments: Pulled[_Segment] = Pulled(produced)
        i = 0
        previous: tuple[int, int] | None = None  # span of the last chunk when the next one may overlap it
        chars_per_token = 4.0
        while segments.has(i):
            first = segments[i]
            start = first.start
            estimate = 0
            if previous is not None and self.overlap_tokens > 0:
                tail = self._overlap_tail(text, previous[0], previous[1], chars_per_token, line_overlap)
                if tail is not None and tail[1] + first.n <= budget:
                    start, estimate = tail
            j = i
            only_headings = True
            while segments.has(j):
                seg = segments[j]
                if j > i:
                    before = segments[j - 1]
                    if seg.part != before.part:  # never across a Document section (slide, sheet, message)
                        break
                    boundary = seg.section != before.section or seg.page != before.page
                    if boundary and not only_headings:
                        break
                    if estimate + seg.n > budget:
                        break
                estimate += seg.n
                only_headings = only_headings and seg.is_heading
                j += 1
            while True:  # verify with one exact count; shrink by a segment when the estimate was short
                a, b = _trim(text, start, segments[j - 1].end)
                count = self._count(text[a:b])
                if count <= self.max_tokens:
                    break
                if j - 1 > i:
                    j -= 1
                elif start != first.start:
                    start = first.start
                else:  # cannot happen: a lone segment is the same string that was counted to fit
                    raise AssertionError(f"segment of {count} tokens exceeds {self.max_tokens}")
            chunk_segments = segments[i:j]
            content = next((s for s in chunk_segments if not s.is_heading), chunk_segments[-1])
            yield a, b, count, content.heading
            more = segments.has(j)
            same_section = more and segments[j].section == segments[j - 1].section
            same_page = more and segments[j].page == segments[j - 1].page
            previous = (a, b) if same_section and same_page else None
            if count > self.specials:
                chars_per_token = max(0.25, (b - a) / (count - self.specials))
            i = j

    def _overlap_tail(
        self, text: str, start: int, end: int, chars_per_token: float = 4.0, lines: bool = False
    ) -> tuple[int, int] | None:
        """A word start ``t`` in (start, end) (a line start when ``lines``) whose tail text[t:end] has at most
        overlap_tokens tokens (and close to that many), with its count (special tokens excluded); None if no such
        tail exists. Interpolation search: usually one or two counts of overlap-sized strings."""
        limit = self.overlap_tokens
        window_start = max(start + 1, end - limit * 16)
        if lines:
            candidates = [k for k in range(window_start, end) if text[k - 1] == "\n" and text[k] != "\n"]
            if not candidates:
                return None
        else:
            candidates = [k for k in range(window_start, end) if text[k - 1].isspace() and not text[k].isspace()]
        if not candidates:  # no spaces (e.g. CJK): fall back to character positions close to the end
            candidates = list(range(max(start + 1, end - limit * 2), end))
            if not candidates:
                return None
        fit: tuple[int, int] | None = None  # (index, tokens) of the earliest candidate known to fit
        fail = -1  # the latest candidate index known not to fit
        guess = bisect.bisect_left(candidates, end - int(limit * 0.9 * chars_per_token))
        index = min(guess, len(candidates) - 1)
        for _ in range(_MAX_PROBES):
            n = self._count(text[candidates[index] : end]) - self.specials
            if n <= limit:
                fit = (index, n)
                if n >= limit * 0.75 or index == 0:
                    break
            else:
                fail = index
            upper = fit[0] if fit is not None else len(candidates)
            if upper - fail <= 1:
                break
            chars_per_token = max(0.25, (end - candidates[index]) / max(1, n))
            guess = bisect.bisect_left(candidates, end - int(limit * 0.9 * chars_per_token))
            index = guess if fail < guess < upper else (fail + upper) // 2
            if index >= len(candidates) or index <= fail:
                break
        if fit is None:
            return None
        return candidates[fit[0]], fit[1]


def _page_of(page_starts: list[int], char: int) -> int | None:
    if not page_starts:
        return None
    return max(1, bisect.bisect_right(page_starts, char))




def chunker_for(counter: TokenCounter, chunk_tokens: int, overlap_tokens: int) -> TokenChunker:
    """The chunker of a collection: ``chunk_tokens`` per chunk (at most the model's limit); the overlap is cut
    to below half a chunk when a small chunk size leaves no room for the configured one."""
    limit = min(int(chunk_tokens), int(counter.max_tokens))
    return TokenChunker(counter, max_tokens=limit, overlap_tokens=min(overlap_tokens, max(0, limit // 2 - 1)))

