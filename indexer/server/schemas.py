"""Request and response bodies of the HTTP API (they make the OpenAPI schema at /openapi.json).

Range checks that depend on settings (k, candidates, input counts) are done by the facade or the service, so
the schema stays the same whatever the configuration; the schema only rules out what is never valid.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from indexer.codec import MAX_IMAGE_BYTES
from indexer.core.location import COLLECTION_PATTERN
from indexer.types import MAX_CLAUSES, MAX_FACETS, MAX_QUERY_CHARS

MAX_IMAGE_URI_CHARS = MAX_IMAGE_BYTES * 4 // 3 + 128  # an image as a base64 data URI


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- /search ---------------------------------------------------------------------------------------------------
class FilterClause(_Strict):
    """The object form of a clause (documentation only: ``where`` is read by the filter language's one reader,
    indexer.search.filters, which answers a wrong shape with its own clear message)."""

    field: str = Field(..., min_length=1, max_length=200, description="path, type, modified, size or a metadata name")
    op: Literal["=", "==", "!=", "<", "<=", ">", ">=", "^=", "~", "in"] = "="
    value: str | float | list[str | float] = Field(..., description="the operand; a list for 'in', '==' or '!='")
    not_: bool = Field(False, alias="not", description="negate the clause")


WHERE_DESCRIPTION = (
    "filter clauses, all of which a hit must meet: 'modified>=2025-01-01', 'sender in ada,linus' (contains any), "
    "'sender==(ada@example.org, linus@example.org)' (equals any), 'not type=pdf', 'size<1M', 'path~docs/*.md' "
    "(docs/search.md), or objects {field, op, value, not}; one text may hold several clauses "
    "('not type=pdf sender in ada,linus')"
)
_CLAUSE_SCHEMA = {
    "type": "object", "required": ["field", "value"], "additionalProperties": False,
    "properties": {
        "field": {"type": "string"}, "op": {"enum": ["=", "==", "!=", "<", "<=", ">", ">=", "^=", "~", "in"]},
        "value": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "array"}]}, "not": {"type": "boolean"},
    },
}
_WHERE_SCHEMA: dict[str, Any] = {"anyOf": [{"type": "string"}, {"type": "array", "maxItems": MAX_CLAUSES, "items": {
    "anyOf": [{"type": "string"}, _CLAUSE_SCHEMA]}}]}


class SearchBody(_Strict):
    query: str = Field("", max_length=MAX_QUERY_CHARS, description="what to look for (empty with an image)")
    image: str | None = Field(
        None, max_length=MAX_IMAGE_URI_CHARS,
        description="pictures like this one (a collection with a multimodal model): the image as a data URI "
        "(data:image/png;base64,...), or the absolute path of an indexed image inside a root; never a URL",
    )
    collection: str = Field("default", min_length=1, max_length=200, pattern=COLLECTION_PATTERN)
    # k, candidates, mode and where are checked by the facade (indexer.search.query.prepare), so every front end
    # gets the same message for the same bad value (`-k 0` through the server as in-process)
    k: Any = Field(None, description="results to return, 1..max_top_k (default: the top_k setting)")
    candidates: Any = Field(None, description="candidates fetched before reranking, 1..max_candidates")
    path_prefix: str | None = Field(None, max_length=4096, description="only files under this absolute path")
    path_glob: str | None = Field(None, max_length=1024, description="glob on the file path, e.g. '*.md'")
    file_types: list[str] = Field(default_factory=list, max_length=64, description="extensions, e.g. ['md', 'py']")
    rerank: bool | None = Field(None, description="rerank on/off (default: on when a reranker is configured)")
    mode: Any = Field(None, description="retrieval mode: dense, lexical or hybrid (default: configured)")
    rerank_candidates: Any = Field(
        None, description="rerank exactly this many candidates (default: as many as rerank_budget_ms allows)"
    )
    metadata: dict[str, str] = Field(
        default_factory=dict, max_length=16,
        description="metadata each hit must have (case-insensitive substring), e.g. {'sender': 'ada@example.org'}",
    )
    where: Any = Field(default_factory=list, description=WHERE_DESCRIPTION, json_schema_extra=_WHERE_SCHEMA)
    facets: list[str] = Field(
        default_factory=list, max_length=MAX_FACETS,
        description="fields whose values to count among the filter's matches, e.g. ['type', 'folder', 'sender']",
    )


class HitOut(BaseModel):
    path: str
    start_line: int
    end_line: int
    page: int | None
    heading: list[str]
    locator: str = Field("", description="where in the file, in its format's terms: 'slide 3: Results', 'Sales!A1:D9'")
    location: dict[str, Any] = Field(default_factory=dict, description="the same place as data, e.g. {'slide': 3}")
    metadata: dict[str, Any] = Field(default_factory=dict, description="author, title, subject, sender, date, ...")
    text: str
    snippet: str = Field("", description="the passage around what matched the query ('…' where cut)")
    marks: list[tuple[int, int]] = Field(
        default_factory=list, description="[start, end) of each word of the snippet that matched the query"
    )
    score: float = Field(..., description="vector (retrieval) score, higher is better")
    rerank_score: float | None = Field(None, description="cross-encoder score when the rerank stage ran")
    chunk_id: str
    media: str = Field("", description="'image' for an image point (its path is the image; no text), else ''")
    width: int | None = Field(None, description="an image hit's width in pixels")
    height: int | None = Field(None, description="an image hit's height in pixels")


class SearchOut(BaseModel):
    collection: str
    hits: list[HitOut]
    reranked: bool
    rerank_count: int = Field(0, description="candidates the rerank stage scored")
    rerank_note: str
    mode: str = Field("dense", description="the retrieval mode that ran")
    timings_ms: dict[str, float]
    warning: str | None = Field(
        None, description="set when the hits may be incomplete (the store and the state disagree; being repaired)"
    )
    matched: int | None = Field(
        None, description="chunks the filter clauses matched (null: no such clause, or a broad filter: not counted)")
    facets: dict[str, list[tuple[str, int]]] = Field(
        default_factory=dict, description="for each facet asked for: [value, matching chunks], commonest first"
    )
    where: list[str] = Field(default_factory=list, description="the filter's clauses as read, one per clause")
    filter_note: str | None = Field(None, description="when the filter matched nothing: the clause that emptied it")


# -- errors ----------------------------------------------------------------------------------------------------
def plain_validation_message(errors: list[Any]) -> str:
    """A request's type errors as one line naming each field (no library text, no links)."""
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail


# -- /v1/embeddings (OpenAI) -----------------------------------------------------------------------------------
class ImageInput(BaseModel):
    """An image item of ``input`` (Jina's shape): a data URI only; the server never fetches a URL."""

    model_config = ConfigDict(extra="forbid")

    image: str = Field(..., max_length=MAX_IMAGE_URI_CHARS, description="data:image/png;base64,... (or jpeg, gif, "
                       "webp)")


EmbeddingInput = str | list[str] | list[int] | list[list[int]] | list[str | ImageInput]


class EmbeddingsBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # OpenAI clients may send fields we do not use (e.g. "user")

    input: EmbeddingInput = Field(..., description="a string, a list of strings, a token list or token lists")
    model: str | None = Field(
        None,
        max_length=1024,
        description="the served embedding model: its id from GET /v1/models (the embed_model setting, the file's "
        "name or stem), an alias of the embed_model_aliases setting (default: 'default', 'indexer'), or left out; "
        "any other name is 404, since vectors of different models cannot be compared",
    )
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, description="not supported: the model's full width is always returned")
    user: str | None = Field(None, max_length=1024)


class EmbeddingItem(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingsOut(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingItem]
    model: str
    usage: Usage


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "indexer"
    kind: Literal["embedding", "rerank"] = Field("embedding", description="what the model does here")


class ModelsOut(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


# -- /v1/rerank (Cohere / Jina) --------------------------------------------------------------------------------
class RerankDocument(BaseModel):
    model_config = ConfigDict(extra="allow")

    text: str


class RerankBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # Cohere clients send e.g. max_tokens_per_doc, rank_fields

    query: str = Field(..., min_length=1)
    documents: list[str | RerankDocument] = Field(..., description="texts, or objects with a 'text' field")
    model: str | None = Field(None, max_length=1024)
    top_n: int | None = Field(None, ge=1)
    return_documents: bool = False


class RerankResultItem(BaseModel):
    index: int
    relevance_score: float
    document: dict[str, Any] | None = None


class RerankMeta(BaseModel):
    billed_units: dict[str, int]
    api_version: dict[str, str] = Field(default_factory=lambda: {"version": "2"})


class RerankOut(BaseModel):
    id: str
    model: str
    results: list[RerankResultItem]
    usage: dict[str, int]
    meta: RerankMeta


# -- admin -----------------------------------------------------------------------------------------------------
class SyncOut(BaseModel):
    collection: str
    report: dict[str, Any]
