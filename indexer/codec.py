"""The one codec for a search request and a search hit as JSON data: the CLI (its printer and its client of a
running server), the HTTP schemas, the server's /search and MCP all go through it. A field added to a request
or a hit (filters, snippets, image hits) is added to :class:`indexer.types.SearchRequest` /
:class:`indexer.types.SearchHit` and to the tables here; ``tests/unit/test_codec.py`` holds the HTTP schema and
the MCP answer to the same names.

Standard library only at import: the console script's fast path (:mod:`indexer.cli.entry`) prints through it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from indexer.errors import InputError

if TYPE_CHECKING:
    from indexer.types import SearchHit, SearchRequest, SearchResult


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _text_or_empty(value: Any) -> str:
    return str(value or "")


def _list(value: Any) -> list[Any]:
    return list(value or ())


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value or {})


def _as_is(value: Any) -> Any:
    return value


def _marks(value: Any) -> list[list[int]]:
    return [[int(a), int(b)] for a, b in (value or ())]


# name -> how a JSON value becomes the hit's (a missing optional field is None before the conversion)
HIT_FIELDS: dict[str, Callable[[Any], Any]] = {
    "path": str,
    "score": float,
    "rerank_score": _optional_float,
    "text": str,
    "start_line": int,
    "end_line": int,
    "page": _as_is,
    "heading": _list,
    "chunk_id": _text_or_empty,
    "locator": _text_or_empty,
    "location": _mapping,
    "metadata": _mapping,
    "snippet": _text_or_empty,
    "marks": _marks,
    "media": _text_or_empty,
    "width": _as_is,
    "height": _as_is,
}
_REQUIRED_HIT_FIELDS = ("path", "score", "text", "start_line", "end_line")

# the fields of a search request a body may carry (the HTTP body and MCP add ``collection``)
REQUEST_FIELDS = (
    "query", "k", "candidates", "path_prefix", "path_glob", "file_types", "rerank", "mode", "rerank_candidates",
    "metadata", "where", "facets", "image",
)
MAX_IMAGE_BYTES = 20 * 1024 * 1024  # the decoded bytes of an image sent as a data URI (indexer.core.images)
_DATA_URI_FORMATS = ("png", "jpeg", "jpg", "gif", "webp", "tiff", "bmp")  # what becomes an image point

RESULT_FIELDS = (
    "hits", "reranked", "rerank_count", "rerank_note", "mode", "timings_ms", "warning", "matched", "facets",
    "where", "filter_note",
)


# -- hits ------------------------------------------------------------------------------------------------------
def hit_json(hit: SearchHit) -> dict[str, Any]:
    """A hit as JSON data (``SearchHit.to_dict``; what ``--json``, /search and MCP give)."""
    return {name: convert(getattr(hit, name)) for name, convert in HIT_FIELDS.items()}


def hit_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """A hit of a /search answer as JSON data of the same shape as :func:`hit_json` (types checked)."""
    out = {}
    for name, convert in HIT_FIELDS.items():
        value = data[name] if name in _REQUIRED_HIT_FIELDS else data.get(name)
        out[name] = convert(value)
    return out


def decode_hit(data: Mapping[str, Any]) -> SearchHit:
    """The :class:`SearchHit` a /search answer's hit describes."""
    from indexer.types import SearchHit

    fields = hit_fields(data)
    fields["heading"] = tuple(fields["heading"])
    fields["marks"] = tuple((a, b) for a, b in fields["marks"])
    return SearchHit(**fields)


# -- results ---------------------------------------------------------------------------------------------------
def result_json(result: SearchResult, collection: str | None = None) -> dict[str, Any]:
    """A result as JSON data; with ``collection`` first, as /search and MCP answer."""
    body: dict[str, Any] = {
        "hits": [hit_json(h) for h in result.hits],
        "reranked": result.reranked,
        "rerank_count": result.rerank_count,
        "rerank_note": result.rerank_note,
        "mode": result.mode,
        "timings_ms": result.timings_ms,
        "warning": result.warning,
        "matched": result.matched,
        "facets": {k: [list(x) for x in v] for k, v in result.facets.items()},
        "where": list(result.where),
        "filter_note": result.filter_note,
    }
    return body if collection is None else {"collection": collection, **body}


COMPACT_SNIPPET = 180  # characters of passage per hit in the compact answer (10 hits stay under 3,000)


def compact_result_json(result: SearchResult, collection: str | None = None) -> dict[str, Any]:
    """A result as an assistant reads it (MCP's default): per hit the path, lines, locator, scores and the
    snippet around the match (cut to ``COMPACT_SNIPPET`` characters), without the chunk's whole text; paths
    relative to ``base``, the folder all hits share, given once. About 250 characters per hit on SciFact abstracts
    (bench/mcp_answer_size.py) instead of ~1,100 with the text."""
    base = _common_folder([h.path for h in result.hits])
    hits = []
    for h in result.hits:
        path = os.path.relpath(h.path, base) if base else h.path
        hit: dict[str, Any] = {"path": path, "lines": f"{h.start_line}-{h.end_line}", "score": round(h.score, 3)}
        if h.locator:
            hit["locator"] = h.locator
        if h.rerank_score is not None:
            hit["rerank_score"] = round(h.rerank_score, 3)
        if h.media:  # an image point: the file is the image's reference
            hit["image"] = {"path": h.path, "width": h.width, "height": h.height}
            del hit["lines"]
        else:
            hit["snippet"] = _trim(h.snippet or " ".join(h.text.split()), list(h.marks), COMPACT_SNIPPET)
        hits.append(hit)
    body: dict[str, Any] = {"base": base, "hits": hits} if base else {"hits": hits}
    body["reranked"] = result.reranked
    if result.matched is not None:
        body["matched"] = result.matched
    if result.facets:
        body["facets"] = {k: [list(x) for x in v] for k, v in result.facets.items()}
    if result.warning:
        body["warning"] = result.warning
    return body if collection is None else {"collection": collection, **body}


def _trim(passage: str, marks: list[tuple[int, int]] | tuple[tuple[int, int], ...], width: int) -> str:
    """``passage`` cut to about ``width`` characters around its first mark, at word boundaries, '…' where cut
    (MCP's compact answer shortens the hit's snippet without matching it again)."""
    if len(passage) <= width:
        return passage
    first = marks[0][0] if marks else 0
    start = max(0, min(first - 40, len(passage) - width))
    if start > 0:
        space = passage.find(" ", start)
        start = space + 1 if 0 <= space < first else start
    end = min(len(passage), start + width)
    if end < len(passage):
        space = passage.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    text = passage[start:end].strip("…").strip()
    return f"{'…' if start > 0 else ''}{text}{'…' if end < len(passage) else ''}"


def _common_folder(paths: list[str]) -> str:
    """The deepest folder holding every path ("" for fewer than two hits or no folder in common but the root)."""
    if len(paths) < 2:
        return ""
    try:
        base = os.path.commonpath([os.path.dirname(p) for p in paths])
    except ValueError:  # relative and absolute mixed (never for indexed files)
        return ""
    return base if base not in ("", os.sep) else ""


def decode_result(answer: Mapping[str, Any]) -> SearchResult:
    """A :class:`SearchResult` from a /search answer (so the CLI prints remote and local results the same way)."""
    from indexer.types import SearchResult

    return SearchResult(
        tuple(decode_hit(h) for h in answer["hits"]),
        bool(answer.get("reranked")),
        str(answer.get("rerank_note", "")),
        {k: float(v) for k, v in answer.get("timings_ms", {}).items()},
        str(answer.get("mode", "dense")),
        int(answer.get("rerank_count", 0)),
        answer.get("warning"),
        answer.get("matched"),
        {str(k): [(str(v), int(n)) for v, n in vals] for k, vals in (answer.get("facets") or {}).items()},
        tuple(str(c) for c in answer.get("where") or ()),
        answer.get("filter_note"),
    )


# -- requests --------------------------------------------------------------------------------------------------
def request_json(request: SearchRequest) -> dict[str, Any]:
    """A request as the body of POST /search (without ``collection``); unset fields are left out."""
    return request_body(**{name: getattr(request, name) for name in REQUEST_FIELDS})


def request_body(**fields: Any) -> dict[str, Any]:
    """The body of POST /search (without ``collection``) from a request's fields by name, without building a
    :class:`SearchRequest` (the console script's fast path stays light); unset fields are left out."""
    unknown = sorted(set(fields) - set(REQUEST_FIELDS))
    if unknown:
        raise InputError(f"unknown search fields {unknown}; a search takes {', '.join(REQUEST_FIELDS)}")
    body: dict[str, Any] = {}
    for name in REQUEST_FIELDS:
        value = fields.get(name)
        if name == "metadata":
            value = dict(value or ())
        elif name in ("file_types", "facets"):
            value = list(value or ())
        elif name == "where":  # clause strings, or parsed clauses as the text they were written as
            value = [getattr(c, "text", c) for c in (value or ())]
        elif name == "image" and isinstance(value, (bytes, bytearray)):
            value = data_uri(bytes(value))
        if value is not None and value != [] and value != {}:
            body[name] = value
    return body


def decode_request(body: Any) -> SearchRequest:
    """The facade's request from an HTTP or MCP body (an object with the request's fields as attributes, or a
    mapping); the facade applies defaults and range checks. A relative ``path_prefix`` is refused: it would be
    resolved against the server's working directory."""
    from indexer.types import SearchRequest

    get = body.get if isinstance(body, Mapping) else lambda name, default=None: getattr(body, name, default)
    query = get("query")
    image = _image(get("image"))
    if image is not None and query is None:
        query = ""
    if not isinstance(query, str):
        raise InputError("a search needs a query: the text to look for (or an image)")
    prefix = get("path_prefix")
    if prefix and not os.path.isabs(os.path.expanduser(prefix)):
        raise InputError(f"path_prefix {prefix!r} is relative; send an absolute folder or file path")
    return SearchRequest(
        query=query,
        k=get("k"),
        candidates=get("candidates"),
        path_prefix=prefix,
        path_glob=get("path_glob"),
        file_types=tuple(get("file_types") or ()),
        rerank=get("rerank"),
        mode=get("mode"),
        rerank_candidates=get("rerank_candidates"),
        metadata=tuple((get("metadata") or {}).items()),
        where=_clauses(get("where")),
        facets=tuple(get("facets") or ()),
        image=image,
    )


def _image(value: Any) -> bytes | str | None:
    """A body's ``image``: a data URI (its bytes) or the absolute path of a file inside a root (the facade checks
    the roots). A URL is refused: the server never fetches one."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InputError("image must be a data URI (data:image/png;base64,...) or an absolute file path, as text")
    if value.startswith("data:"):
        return decode_data_uri(value)
    if "://" in value:
        raise InputError("image is a URL; the server never fetches one: send the bytes as a data URI "
                         "(data:image/png;base64,...) or the path of an indexed file")
    if not os.path.isabs(os.path.expanduser(value)):
        raise InputError(f"image path {value!r} is relative; send an absolute path inside a root, or a data URI")
    return value


def decode_data_uri(value: str, limit: int = MAX_IMAGE_BYTES) -> bytes:
    """The bytes of ``data:image/<format>;base64,<data>``; InputError naming what is wrong (not a data URI, not
    an image type, not base64, over ``limit`` bytes)."""
    import base64
    import binascii

    head, sep, payload = value.partition(",")
    if not value.startswith("data:") or not sep:
        raise InputError("an image must be a data URI: data:image/png;base64,<base64 bytes>")
    kind = head[5:].split(";")
    fmt = kind[0].lower()
    if not fmt.startswith("image/") or fmt[6:] not in _DATA_URI_FORMATS:
        raise InputError(f"the data URI's type is {kind[0][:60]!r}; use image/png, image/jpeg, image/gif, image/webp "
                         "or image/tiff")
    if "base64" not in [k.lower() for k in kind[1:]]:
        raise InputError("the data URI must be base64 encoded: data:image/png;base64,...")
    if len(payload) > (limit * 4) // 3 + 4:
        raise InputError(f"the image is larger than {limit:,} bytes; send a smaller one")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("the data URI's data is not valid base64") from None
    if not data:
        raise InputError("the data URI holds no bytes")
    return data


def data_uri(data: bytes) -> str:
    """``data`` as a base64 data URI with its image type read from the signature (PNG when unknown)."""
    import base64

    fmt = ("jpeg" if data[:3] == b"\xff\xd8\xff" else "gif" if data[:4] == b"GIF8"
           else "webp" if data[:4] == b"RIFF" and data[8:12] == b"WEBP"
           else "tiff" if data[:4] in (b"II*\x00", b"MM\x00*") else "png")
    return f"data:image/{fmt};base64,{base64.b64encode(data).decode('ascii')}"


def _clauses(value: Any) -> tuple[Any, ...]:
    """A body's ``where``: one clause (text or object) or a list of them; checked by the facade."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        return (value,)  # one clause; anything else is refused by the filter language's reader, with its message
    items = tuple(value)
    return tuple(v.model_dump(by_alias=True) if hasattr(v, "model_dump") else v for v in items)
