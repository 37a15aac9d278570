"""llama.cpp's MTMD library (``llama_cpp.mtmd_cpp``) behind a small adapter: a projector bound to one text model,
its bitmaps and its tokenized chunks, each freed on every path.

Native failures become Python errors here (ValueError for input the projector cannot take, RuntimeError for a
native call that failed); nothing in this module hands a NULL to llama.cpp. A projector file is checked with
gguf-py before ``mtmd_init_from_file`` reads it (a GGUF that is not an MTMD projector, or whose position
embeddings are not F32, would abort the process inside llama.cpp's graph builder).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from indexer.models import native

REQUIRED_SYMBOLS = (
    "mtmd_context_params_default", "mtmd_init_from_file", "mtmd_free", "mtmd_support_vision", "mtmd_support_audio",
    "mtmd_default_marker", "mtmd_helper_bitmap_init_from_buf", "mtmd_bitmap_free", "mtmd_input_chunks_init",
    "mtmd_input_chunks_free", "mtmd_input_chunks_size", "mtmd_input_chunks_get", "mtmd_tokenize",
    "mtmd_tokenize_from_parts", "mtmd_input_chunk_get_type", "mtmd_input_chunk_get_n_tokens",
    "mtmd_input_chunk_get_n_pos", "mtmd_input_chunk_get_tokens_text", "mtmd_input_chunk_get_tokens_image",
    "mtmd_encode_chunk", "mtmd_get_output_embd", "mtmd_decode_use_non_causal", "mtmd_decode_use_mrope",
    "mtmd_image_tokens_get_decoder_pos",
)
CHUNK_TEXT, CHUNK_IMAGE, CHUNK_AUDIO = 0, 1, 2
_KINDS = {CHUNK_TEXT: "text", CHUNK_IMAGE: "image", CHUNK_AUDIO: "audio"}


def load_mtmd() -> Any:
    """The ``llama_cpp.mtmd_cpp`` module, after checking that its library has every symbol this path calls."""
    try:
        from llama_cpp import mtmd_cpp
    except (ImportError, OSError) as exc:
        raise RuntimeError(f"llama.cpp's MTMD library cannot be loaded ({exc}); multimodal embedding needs it") from exc
    lib = getattr(mtmd_cpp, "_libmtmd", None)
    missing = [s for s in REQUIRED_SYMBOLS if lib is None or not hasattr(lib, s)]
    if missing:
        raise RuntimeError(f"llama.cpp's MTMD library lacks {', '.join(missing)}; this llama-cpp-python build "
                           "cannot embed media")
    global _LOG_CALLBACK
    if _LOG_CALLBACK is None and hasattr(lib, "mtmd_helper_log_set"):
        import llama_cpp

        # MTMD's (and CLIP's) log through Python logging, shown by `-v`: llama-cpp-python's own callback reads
        # ggml's levels with an older table and prints every warning as an error ("Qwen-VL models require at
        # minimum 1024 image tokens ..." on each projector load). The last errors go into a load's error.
        _LOG_CALLBACK = llama_cpp.llama_log_callback(_native_log)
        mtmd_cpp.mtmd_helper_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
    return mtmd_cpp


_LOG_CALLBACK: Any = None  # kept referenced: llama.cpp calls it for the life of the process
_RECENT: collections.deque[str] = collections.deque(maxlen=4)  # the last errors
_native_logger = logging.getLogger(__name__)
_last_level = [1]
_verbose = [False]  # a projector opened with verbose=True prints MTMD's log on stderr as llama.cpp does


def _native_log(level: int, text: bytes, _user_data: Any) -> None:
    """ggml's levels (ggml.h today; llama-cpp-python's table is older): 1 debug, 2 info, 3 warn, 4 error, 5 the
    previous line continued. MTMD's warnings and errors log at INFO (shown by `-v`), the rest at DEBUG."""
    line = (text or b"").decode("utf-8", "replace")
    if _verbose[0]:
        sys.stderr.write(line)
    if level != 5:
        _last_level[0] = level
    if line.strip():
        if _last_level[0] == 4:
            _RECENT.append(line.strip())
        _native_logger.log(logging.INFO if _last_level[0] in (3, 4) else logging.DEBUG, "%s", line.rstrip())


def recent_native_log() -> str:
    """The last errors MTMD logged (a failed load names its reason there), joined; "" when none."""
    return " | ".join(_RECENT)


def check_projector_file(path: str | Path) -> dict[str, Any]:
    """Read an MTMD projector's metadata with gguf-py (no native call); ValueError when it is not one."""
    import gguf

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"projector file {path} does not exist")
    try:
        reader = gguf.GGUFReader(path)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"{path} is not a GGUF file ({type(exc).__name__}: {exc})") from exc
    meta = {name: field.contents() for name, field in reader.fields.items() if not name.startswith("tokenizer.")}
    if meta.get("general.architecture") != "clip":
        raise ValueError(f"{path} is not an MTMD projector (general.architecture is "
                         f"{meta.get('general.architecture')!r}, not 'clip'); pass the model's mmproj GGUF")
    if not (meta.get("clip.has_vision_encoder") or meta.get("clip.has_audio_encoder")):
        raise ValueError(f"{path} has neither a vision nor an audio encoder")
    for tensor in reader.tensors:
        if tensor.name.startswith("v.position_embd") and tensor.tensor_type != gguf.GGMLQuantizationType.F32 and (
                meta.get("clip.projector_type") == "qwen3vl_merger"):
            raise ValueError(f"{path}: {tensor.name} is {tensor.tensor_type.name}, but llama.cpp interpolates it in "
                             "F32 only (it would abort); rebuild the projector")
    return meta


@dataclass(frozen=True)
class RawChunk:
    """One tokenized chunk, copied out of native memory (media rows are filled in by :meth:`Projector.encode`)."""

    kind: str
    n_tokens: int
    n_pos: int
    tokens: tuple[int, ...]
    handle: Any  # the native chunk; valid only while its ChunkList is open


class Projector:
    """An MTMD context bound to one llama.cpp text model; :meth:`close` frees it (idempotent)."""

    def __init__(self, path: str | Path, model: Any, *, n_threads: int, use_gpu: bool = False,
                 image_min_tokens: int | None = None, image_max_tokens: int | None = None,
                 verbose: bool = False) -> None:
        self.mtmd = load_mtmd()
        _verbose[0] = _verbose[0] or bool(verbose)
        self.path = str(path)
        self.meta = check_projector_file(path)
        native.check_model_file(path)  # a weight type this machine's llama.cpp cannot run: refused, not loaded
        params = self.mtmd.mtmd_context_params_default()
        params.use_gpu = bool(use_gpu)
        params.print_timings = bool(verbose)
        params.n_threads = int(n_threads)
        params.warmup = False
        if image_min_tokens is not None:
            params.image_min_tokens = int(image_min_tokens)
        if image_max_tokens is not None:
            params.image_max_tokens = int(image_max_tokens)
        _RECENT.clear()
        self.ctx = self.mtmd.mtmd_init_from_file(self.path.encode("utf-8"), model, params)
        if not self.ctx:
            raise ValueError(f"llama.cpp could not load the projector {self.path} for this model: its projector "
                             "type may be unknown to this build, or its output width does not match the text "
                             f"model's input width (a projector of another model); llama.cpp said: "
                             f"{recent_native_log() or 'nothing'}")
        self.model = model
        self.vision = bool(self.mtmd.mtmd_support_vision(self.ctx))
        self.audio = bool(self.mtmd.mtmd_support_audio(self.ctx))
        self.mrope = bool(self.mtmd.mtmd_decode_use_mrope(self.ctx))
        self.marker = (self.mtmd.mtmd_default_marker() or b"<__media__>").decode("utf-8")

    @property
    def closed(self) -> bool:
        return not getattr(self, "ctx", None)

    def close(self) -> None:
        ctx, self.ctx = getattr(self, "ctx", None), None
        if ctx:
            self.mtmd.mtmd_free(ctx)

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeError("the MTMD projector is closed")

    @contextlib.contextmanager
    def bitmaps(self, payloads: Sequence[bytes], formats: Sequence[str]) -> Iterator[list[Any]]:
        """Native bitmaps decoded from ``payloads`` (freed on exit); ValueError for bytes llama.cpp cannot decode."""
        self.check_open()
        made: list[Any] = []
        try:
            for i, (data, fmt) in enumerate(zip(payloads, formats, strict=True)):
                buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
                bitmap = self.mtmd.mtmd_helper_bitmap_init_from_buf(self.ctx, buf, len(data), False)
                if not bitmap:
                    hint = (" (this llama.cpp build decodes WebP only through ffmpeg, which it was built without)"
                            if fmt == "webp" else "")
                    raise ValueError(f"media item {i} ({fmt}, {len(data)} bytes) cannot be decoded{hint}")
                made.append(bitmap)
            yield made
        finally:
            for bitmap in made:
                self.mtmd.mtmd_bitmap_free(bitmap)

    @contextlib.contextmanager
    def tokenize(self, text: str | None, parts: Sequence[str | int] | None, bitmaps: Sequence[Any],
                 add_special: bool, parse_special: bool) -> Iterator[list[RawChunk]]:
        """Tokenize a marker prompt (``text``) or ordered ``parts`` (str, or an int index into ``bitmaps``); the
        chunks are freed on exit."""
        self.check_open()
        chunks = self.mtmd.mtmd_input_chunks_init()
        if not chunks:
            raise RuntimeError("mtmd_input_chunks_init returned NULL")
        try:
            rc = self._tokenize_into(chunks, text, parts, bitmaps, add_special, parse_special)
            if rc != 0:
                raise ValueError(f"mtmd_tokenize failed ({rc}): " + {
                    1: "the number of media markers does not match the number of media items",
                    2: "a media item could not be preprocessed"}.get(rc, "see llama.cpp's log"))
            yield [self._raw_chunk(self.mtmd.mtmd_input_chunks_get(chunks, i))
                   for i in range(int(self.mtmd.mtmd_input_chunks_size(chunks)))]
        finally:
            self.mtmd.mtmd_input_chunks_free(chunks)

    def _tokenize_into(self, chunks: Any, text: str | None, parts: Sequence[str | int] | None,
                       bitmaps: Sequence[Any], add_special: bool, parse_special: bool) -> int:
        m = self.mtmd
        if parts is None:
            raw = (text or "").encode("utf-8")
            inp = m.mtmd_input_text(raw, len(raw), bool(add_special), bool(parse_special))
            arr = (m.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            return int(m.mtmd_tokenize(self.ctx, chunks, ctypes.byref(inp), arr, len(bitmaps)))
        keep: list[Any] = []
        ptrs = (ctypes.POINTER(m.mtmd_input_part) * len(parts))()
        for i, part in enumerate(parts):
            if isinstance(part, str):
                raw = part.encode("utf-8")
                inp = m.mtmd_input_text(raw, len(raw), bool(add_special), bool(parse_special))
                entry = m.mtmd_input_part(ctypes.pointer(inp), None)
                keep += [raw, inp]
            else:
                entry = m.mtmd_input_part(None, bitmaps[part])
            keep.append(entry)
            ptrs[i] = ctypes.pointer(entry)
        return int(m.mtmd_tokenize_from_parts(self.ctx, chunks, ptrs, len(parts), bool(add_special)))

    def _raw_chunk(self, chunk: Any) -> RawChunk:
        m = self.mtmd
        kind = _KINDS.get(int(m.mtmd_input_chunk_get_type(chunk)))
        if kind is None:
            raise RuntimeError("MTMD returned a chunk of an unknown type")
        tokens: tuple[int, ...] = ()
        if kind == "text":
            n = ctypes.c_size_t(0)
            ptr = m.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            tokens = tuple(int(ptr[i]) for i in range(n.value)) if ptr and n.value else ()
        return RawChunk(kind, int(m.mtmd_input_chunk_get_n_tokens(chunk)), int(m.mtmd_input_chunk_get_n_pos(chunk)),
                        tokens, chunk)

    def use_non_causal(self, chunk: RawChunk) -> bool:
        return bool(self.mtmd.mtmd_decode_use_non_causal(self.ctx, chunk.handle))

    def encode(self, chunk: RawChunk, width: int) -> npt.NDArray[np.float32]:
        """Run the projector on a media chunk; its ``(n_tokens, width)`` output rows, copied."""
        self.check_open()
        rc = int(self.mtmd.mtmd_encode_chunk(self.ctx, chunk.handle))
        if rc != 0:
            raise RuntimeError(f"mtmd_encode_chunk returned {rc}")
        ptr = self.mtmd.mtmd_get_output_embd(self.ctx)
        if not ptr:
            raise RuntimeError("mtmd_get_output_embd returned NULL")
        rows = np.ctypeslib.as_array(ptr, shape=(chunk.n_tokens * width,)).copy()
        return rows.reshape(chunk.n_tokens, width)

    def media_positions(self, chunk: RawChunk, pos_0: int) -> npt.NDArray[np.int32]:
        """Decoder positions of a media chunk's rows: ``(n, 4)`` (t, y, x, z) under M-RoPE, else ``(n,)``."""
        n = chunk.n_tokens
        if not self.mrope:
            return np.arange(pos_0, pos_0 + n, dtype=np.int32)
        if chunk.kind != "image":  # audio under M-RoPE: the same position on every axis
            return np.repeat(np.arange(pos_0, pos_0 + n, dtype=np.int32)[:, None], 4, axis=1)
        image = self.mtmd.mtmd_input_chunk_get_tokens_image(chunk.handle)
        if not image:
            raise RuntimeError("an image chunk has no image tokens")
        out = np.empty((n, 4), dtype=np.int32)
        for i in range(n):
            p = self.mtmd.mtmd_image_tokens_get_decoder_pos(image, pos_0, i)
            out[i] = (p.t, p.y, p.x, p.z)
        return out
