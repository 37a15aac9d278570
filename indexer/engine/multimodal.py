"""Multimodal embedding through an MTMD projector: the seed's ``llama_cpp.llama_multimodal`` interfaces.

* :class:`MTMDBaseHandler`: media preparation for custom consumers. ``handler.tokenize(model, prompt, media)``
  or ``handler.tokenize_parts(model, parts)`` is a context manager yielding an :class:`MTMDRequest`; call
  ``request.encode()`` inside it. The result is a tuple of :class:`MTMDEncodedChunk`, in input order, owned
  by Python (usable after the scope and after later encodes).
* :class:`MTMDEmbeddingHandler`: ``embed(model, ...)`` pools text and media into one vector (the work behind
  ``LlamaEmbedding.embed_multimodal``).

A standalone handler binds to the first model it is used with and cannot serve another; close it before that
model. A handler given to ``LlamaEmbedding(embedding_handler=...)`` (or made from ``mmproj_path``) is owned by
the model, which closes it first when it closes. Every check that can be made in Python (closed objects,
pooling, argument types, marker count, media kinds) runs before any native call; the projector's own size
checks run after tokenization and before anything is encoded or decoded. Native bitmaps and chunks are freed
on every path. Not thread-safe: do not share a model or handler between threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from indexer.engine import mtmd_decode
from indexer.engine.media import AUDIO, IMAGE, detect_media
from indexer.engine.mtmd_native import Projector, RawChunk
from indexer.engine.plan import normalize_array, resolve_norm_mode

# The model is a LlamaEmbedding (typed Any: that module imports this one).
LlamaEmbedding = Any

__all__ = ["MTMDBaseHandler", "MTMDEmbeddingHandler", "MTMDEncodedChunk", "MTMDRequest"]

_IMAGE_FORMATS = frozenset({"png", "jpeg", "gif", "webp", "bmp"})
_AUDIO_FORMATS = frozenset({"wav", "mp3", "flac"})


@dataclass(frozen=True)
class MTMDEncodedChunk:
    """One chunk of an encoded request: text tokens, or a read-only float32 ``(n_tokens, width)`` matrix of media
    rows; absolute decoder positions (text: one scalar per token; media: ``(n,)`` or ``(n, 4)`` under M-RoPE),
    the chunk's position span ``n_pos`` and whether the projector asks for bidirectional attention inside it."""

    kind: str
    n_tokens: int
    n_pos: int
    positions: npt.NDArray[np.int32]
    tokens: tuple[int, ...] = ()
    embeddings: npt.NDArray[np.float32] | None = None
    use_non_causal: bool = False


@dataclass
class MTMDRequest:
    """A tokenized request, valid inside its ``tokenize`` scope: :meth:`encode` runs the projector."""

    handler: MTMDBaseHandler
    width: int
    raw: list[RawChunk]
    n_tokens: int = field(init=False)
    n_pos: int = field(init=False)
    non_causal: tuple[bool, ...] = field(init=False)
    _open: bool = True

    def __post_init__(self) -> None:
        self.n_tokens = sum(c.n_tokens for c in self.raw)
        self.n_pos = sum(c.n_pos for c in self.raw)
        projector = self.handler.projector
        self.non_causal = tuple(c.kind != "text" and projector.use_non_causal(c) for c in self.raw)

    def encode(self) -> tuple[MTMDEncodedChunk, ...]:
        """Encode every media chunk; owned results in input order. RuntimeError outside the tokenize scope."""
        if not self._open:
            raise RuntimeError("this request's tokenize() scope has exited: its native chunks are freed; encode "
                               "inside the with-block")
        projector = self.handler.projector
        out: list[MTMDEncodedChunk] = []
        pos = 0
        for chunk, non_causal in zip(self.raw, self.non_causal, strict=True):
            if chunk.kind == "text":
                positions = np.arange(pos, pos + chunk.n_tokens, dtype=np.int32)
                out.append(MTMDEncodedChunk("text", chunk.n_tokens, chunk.n_pos, _frozen(positions), chunk.tokens))
            else:
                rows = _frozen(projector.encode(chunk, self.width))
                positions = _frozen(projector.media_positions(chunk, pos))
                out.append(MTMDEncodedChunk(chunk.kind, chunk.n_tokens, chunk.n_pos, positions, (), rows, non_causal))
            pos += chunk.n_pos
        return tuple(out)


def _frozen(arr: npt.NDArray[Any]) -> npt.NDArray[Any]:
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True)
class _Input:
    prompt: str | None
    parts: list[str | int] | None  # str, or an index into payloads
    payloads: list[bytes]
    formats: list[str]


class MTMDBaseHandler:
    """An MTMD projector GGUF and its settings; the native context is made on first use with a model."""

    def __init__(self, clip_model_path: str, *, n_threads: int | None = None, image_min_tokens: int | None = None,
                 image_max_tokens: int | None = None, use_gpu: bool = False, verbose: bool = False) -> None:
        if not isinstance(clip_model_path, str) or not clip_model_path:
            raise TypeError("clip_model_path must be the projector GGUF's path (a non-empty str)")
        for name, value in (("n_threads", n_threads), ("image_min_tokens", image_min_tokens),
                            ("image_max_tokens", image_max_tokens)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")
        self.clip_model_path = clip_model_path
        self.settings = {"n_threads": n_threads, "image_min_tokens": image_min_tokens,
                         "image_max_tokens": image_max_tokens, "use_gpu": use_gpu, "verbose": verbose}
        self._projector: Projector | None = None
        self._model: LlamaEmbedding | None = None
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------------------

    @property
    def projector(self) -> Projector:
        if self._projector is None:
            raise RuntimeError("the handler has no projector yet (use it with a model first)")
        return self._projector

    def close(self) -> None:
        """Free the projector (idempotent); the handler cannot be used afterwards."""
        self._closed = True
        if self._projector is not None:
            self._projector.close()
            self._projector = None

    def __enter__(self) -> MTMDBaseHandler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def bind(self, model: LlamaEmbedding) -> Projector:
        """The projector for ``model``, made on first use; a handler serves one model only."""
        if self._closed:
            raise RuntimeError("this MTMD handler is closed")
        model._check_open()
        if self._model is not None and self._model is not model:
            raise ValueError("this MTMD handler is bound to another model; create one handler per model")
        if self._projector is None:
            threads = self.settings["n_threads"] or int(model.context_params.n_threads_batch)
            self._projector = Projector(self.clip_model_path, model._model.model, n_threads=threads,
                                        use_gpu=bool(self.settings["use_gpu"]),
                                        image_min_tokens=self.settings["image_min_tokens"],
                                        image_max_tokens=self.settings["image_max_tokens"],
                                        verbose=bool(self.settings["verbose"]))
            self._model = model
        return self._projector

    # -- tokenization ----------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def tokenize(self, model: LlamaEmbedding, prompt: str | None, media: Sequence[bytes] = (), *,
                 add_special: bool = True, parse_special: bool = True) -> Iterator[MTMDRequest]:
        """Tokenize a prompt holding one media marker per item of ``media`` (encoded image/audio bytes)."""
        inp = self._check_prompt(prompt, media)
        with self._request(model, inp, add_special, parse_special) as request:
            yield request

    @contextlib.contextmanager
    def tokenize_parts(self, model: LlamaEmbedding, parts: Sequence[str | bytes], *, add_special: bool = True,
                       parse_special: bool = True) -> Iterator[MTMDRequest]:
        """Tokenize ordered text and media parts (no markers needed)."""
        inp = self._check_parts(parts)
        with self._request(model, inp, add_special, parse_special) as request:
            yield request

    @contextlib.contextmanager
    def _request(self, model: LlamaEmbedding, inp: _Input, add_special: bool,
                 parse_special: bool) -> Iterator[MTMDRequest]:
        projector = self.bind(model)
        self._check_media_support(projector, inp)
        if inp.prompt is not None and inp.prompt.count(projector.marker) != len(inp.payloads):
            raise ValueError(f"the prompt has {inp.prompt.count(projector.marker)} media markers "
                             f"({projector.marker!r}) but {len(inp.payloads)} media items were given; put one "
                             "marker where each item goes, or pass parts=[...] instead")
        width = model.n_embd_inp
        with projector.bitmaps(inp.payloads, inp.formats) as bitmaps, projector.tokenize(
                inp.prompt, inp.parts, bitmaps, add_special, parse_special) as raw:
            request = MTMDRequest(self, width, raw)
            try:
                yield request
            finally:
                request._open = False

    # -- checks before any native call -----------------------------------------------------------------------

    def _check_prompt(self, prompt: str | None, media: Sequence[bytes]) -> _Input:
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str or None, got {type(prompt).__name__}")
        if isinstance(media, (bytes, bytearray, memoryview, str)):
            raise TypeError("media must be a sequence of encoded files (e.g. [png_bytes]), not one bytes object")
        payloads = [_as_bytes(m, i) for i, m in enumerate(media)]
        return _Input(prompt or "", None, payloads, [_media_format(p, i) for i, p in enumerate(payloads)])

    def _check_parts(self, parts: Sequence[str | bytes]) -> _Input:
        if isinstance(parts, (str, bytes, bytearray)) or not isinstance(parts, Sequence):
            raise TypeError("parts must be a list of str and bytes items")
        out: list[str | int] = []
        payloads: list[bytes] = []
        for i, part in enumerate(parts):
            if isinstance(part, str):
                out.append(part)
            else:
                payloads.append(_as_bytes(part, i))
                out.append(len(payloads) - 1)
        if not out:
            raise ValueError("parts is empty: give at least one text or media item")
        return _Input(None, out, payloads, [_media_format(p, i) for i, p in enumerate(payloads)])

    @staticmethod
    def _check_media_support(projector: Projector, inp: _Input) -> None:
        for i, fmt in enumerate(inp.formats):
            if fmt in _AUDIO_FORMATS and not projector.audio:
                raise ValueError(f"media item {i} is {fmt} audio, but the projector {projector.path} has no audio "
                                 "encoder (a vision-only projector)")
            if fmt in _IMAGE_FORMATS and not projector.vision:
                raise ValueError(f"media item {i} is a {fmt} image, but the projector {projector.path} has no "
                                 "vision encoder")


def _as_bytes(item: object, i: int) -> bytes:
    if isinstance(item, (bytes, bytearray, memoryview)):
        data = bytes(item)
        if not data:
            raise ValueError(f"media item {i} is empty")
        return data
    raise TypeError(f"media item {i} must be the encoded file's bytes (load paths and URLs first), got "
                    f"{type(item).__name__}")


def _media_format(data: bytes, i: int) -> str:
    media = detect_media(data)
    if media is None:
        raise ValueError(f"media item {i} ({len(data)} bytes) is not a supported image or audio file (PNG, JPEG, "
                         "GIF, WebP, BMP; WAV, MP3, FLAC): unknown signature")
    if media.kind == IMAGE and media.format in _IMAGE_FORMATS:
        return media.format
    if media.kind == AUDIO and media.format in _AUDIO_FORMATS:
        return media.format
    if media.kind == "video":
        raise ValueError(f"media item {i} is {media.format} video; video is not supported by the embedding path "
                         "(embed frames as images instead)")
    raise ValueError(f"media item {i} is {media.format} ({media.kind}), which llama.cpp's media loader cannot "
                     "decode")


class MTMDEmbeddingHandler(MTMDBaseHandler):
    """Pools text and media into one vector (pooling and normalization on top of :class:`MTMDBaseHandler`)."""

    def embed(self, model: LlamaEmbedding, prompt: str | None = None, media: Sequence[bytes] = (), *,
              parts: Sequence[str | bytes] | None = None, normalize: object = 2,
              return_count: bool = False) -> Any:
        """One pooled ``List[float]`` of width ``n_embd_out`` (and the token count, media rows included)."""
        model._check_open()
        mode = resolve_norm_mode(normalize)
        if model.pooling not in mtmd_decode.POOLED:
            raise ValueError(f"embed_multimodal needs MEAN, CLS or LAST pooling; this model's pooling is "
                             f"{model.pooling} (NONE=0, RANK=4 are text-only)")
        if parts is not None and (prompt is not None or len(media)):
            raise ValueError("pass either prompt/media or parts, not both")
        if parts is None and not prompt and not len(media):
            raise ValueError("nothing to embed: give a prompt (with media markers) or parts=[...]")
        scope = (self.tokenize_parts(model, parts) if parts is not None
                 else self.tokenize(model, prompt, media))
        with scope as request:
            mtmd_decode.check_decodable(
                [_Span(c.n_tokens, c.n_pos, nc) for c, nc in zip(request.raw, request.non_causal, strict=True)],
                causal=model.causal, limit=min(model.n_batch_eff, model.n_ubatch_eff),
                n_ctx=int(model.n_ctx()))
            chunks = request.encode()
        vector = model.decode_multimodal(chunks)
        result = [float(x) for x in normalize_array(vector, mode)]
        return (result, request.n_tokens) if return_count else result


@dataclass(frozen=True)
class _Span:
    n_tokens: int
    n_pos: int
    use_non_causal: bool
