"""``/v1/embeddings`` (OpenAI shape), ``/v1/models`` and ``/v1/rerank`` (Cohere v2 / Jina shape).

Embeddings are L2-normalised (as OpenAI's are). ``encoding_format=base64`` is little-endian float32, which is
what the official ``openai`` client asks for by default and decodes. ``dimensions`` other than the model's own
width is refused: truncating a non-Matryoshka model's vectors would silently hurt retrieval.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import numpy as np
from fastapi import APIRouter, Request

from indexer.codec import decode_data_uri
from indexer.errors import InputError
from indexer.server import schemas
from indexer.server.service import Service


async def models(request: Request) -> dict[str, Any]:
    """The models this server serves (embedding, then reranker when configured)."""
    svc = _service(request)
    data = [{"id": n, "kind": "embedding"} for n in svc.model_names()]
    reranker = svc.rerank_model_name()
    if reranker:
        data.append({"id": reranker, "kind": "rerank"})
    return {"object": "list", "data": data}


async def embeddings(body: schemas.EmbeddingsBody, request: Request) -> dict[str, Any]:
    """OpenAI-compatible embeddings: a string, a list of strings, a token list, or token lists; with a multimodal
    model also images, Jina's shape: ``{"image": "data:image/png;base64,..."}`` items (data URIs only: the server
    never fetches a URL)."""
    svc = _service(request)
    items = _items(body.input)
    svc.models.check_embed_count(len(items))
    vectors, tokens, name = await svc.embed(items, body.model, body.dimensions)
    data = [
        {"object": "embedding", "index": i, "embedding": _encode(v, body.encoding_format)}
        for i, v in enumerate(vectors)
    ]
    return {
        "object": "list",
        "data": data,
        "model": name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


async def rerank(body: schemas.RerankBody, request: Request) -> dict[str, Any]:
    """Cohere/Jina-compatible rerank (/v1/rerank; /v2/rerank for Cohere's v2 client): results sorted by
    relevance_score, best first."""
    svc = _service(request)
    texts = [d if isinstance(d, str) else d.text for d in body.documents]
    svc.models.check_rerank(body.query, texts)
    scores, tokens, name = await svc.rerank(body.query, texts, body.model)
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)
    if body.top_n is not None:
        order = order[: body.top_n]
    results = []
    for i in order:
        item: dict[str, Any] = {"index": i, "relevance_score": float(scores[i])}
        if body.return_documents:
            doc = body.documents[i]
            item["document"] = {"text": doc} if isinstance(doc, str) else doc.model_dump()
        results.append(item)
    return {
        "id": str(uuid.uuid4()),
        "model": name,
        "results": results,
        "usage": {"total_tokens": tokens},
        "meta": {"billed_units": {"search_units": 1}, "api_version": {"version": "2"}},
    }


def add_v1_routes(router: APIRouter) -> None:
    """The /v1 routes, each a named function of this module."""
    router.add_api_route("/v1/models", models, methods=["GET"], response_model=schemas.ModelsOut, tags=["v1"])
    router.add_api_route(
        "/v1/embeddings", embeddings, methods=["POST"], response_model=schemas.EmbeddingsOut, tags=["v1"]
    )
    for path in ("/v1/rerank", "/v2/rerank"):
        router.add_api_route(
            path, rerank, methods=["POST"], response_model=schemas.RerankOut, response_model_exclude_none=True,
            tags=["v1"],
        )


def _service(request: Request) -> Service:
    svc: Service = request.app.state.service
    return svc


def _items(value: Any) -> list[str | list[int] | bytes]:
    if isinstance(value, str):
        return [value]
    if not value:
        raise InputError("input is empty; send a string, a list of strings or a list of token ids")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [list(value)]  # one token list
    out: list[str | list[int] | bytes] = []
    for i, v in enumerate(value):
        if isinstance(v, schemas.ImageInput):
            try:
                out.append(decode_data_uri(v.image))
            except InputError as exc:
                raise InputError(f"input[{i}].image: {exc}") from None
        else:
            out.append(v if isinstance(v, str) else list(v))
    return out


def _encode(vector: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]
