"""Pure planning logic of the embedding engine: no llama.cpp import, so unit tests run without a model.

Token budgets (per-input limits, fair cuts of rerank pairs), packing inputs into decode batches, the order
they are decoded in, normalization of outputs, input parsing, and the per-batch thread choice.
:mod:`indexer.engine.llama_embedding` keeps the ctypes/llama.cpp side and re-exports these names.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_PACK_TOKENS",
    "NORM_MODE_EUCLIDEAN",
    "NORM_MODE_MAX_INT16",
    "NORM_MODE_NONE",
    "NORM_MODE_PNORM",
    "NORM_MODE_TAXICAB",
    "TOKEN_NULL",
    "PACK_CANDIDATES",
    "BatchPlan",
    "PackChooser",
    "ThreadChooser",
    "VocabSpecials",
    "apply_token_limit",
    "balanced_pack_tokens",
    "build_rank_pair",
    "choose_n_seq_max",
    "cosine_matrix",
    "fair_split",
    "normalize_array",
    "packs_matter",
    "parse_input",
    "plan_batches",
    "rank_pair_overhead",
    "rank_pair_within",
    "rank_score",
    "render_rerank_template",
    "resolve_norm_mode",
    "validate_token_ids",
]

NORM_MODE_NONE = -1
NORM_MODE_MAX_INT16 = 0
NORM_MODE_TAXICAB = 1
NORM_MODE_EUCLIDEAN = 2
NORM_MODE_PNORM = 6

TOKEN_NULL = -1
# Tokens per packed decode batch when the caller does not choose. Attention over a packed batch costs the square
# of its tokens (a non-causal model attends across the whole micro-batch, masked), so small packs win once the
# weight products are cheap: on the Intel Xeon with AMX (q8_0 on AMX tiles), 128 against 512 gave 1.9x on short
# queries and 1.09x on ~200-token texts; 64 loses on short ones (docs/benchmarks.md). On the AMD EPYC, 256
# measured 1.14x / 1.00x against 512 (noisy). Inputs longer than this still go alone in a batch up to the limit.
DEFAULT_PACK_TOKENS = 128
# The packs a PackChooser measures when the caller fixes none (DEFAULT_PACK_TOKENS first: the fallback). After
# the flash-attention patches (indexer/engine/llama_cpp_patches) the AMD EPYC measured 128, 256 and 512 within 3 %
# of each other on short queries and 64 at 0.6x; the Intel Xeon measured 128 at 1.9x 512 before them: per CPU.
PACK_CANDIDATES = (DEFAULT_PACK_TOKENS, 256)

Item = str | list[int]


def resolve_norm_mode(normalize: object) -> int:
    """Map ``normalize`` to a mode: ``True`` -> 2 (L2), ``False`` -> -1 (none), ints are the mode."""
    if isinstance(normalize, bool):
        return NORM_MODE_EUCLIDEAN if normalize else NORM_MODE_NONE
    if isinstance(normalize, (int, np.integer)):
        return int(normalize)
    raise TypeError(
        f"normalize must be a bool or an int mode (-1 none, 0 max-int16, 1 L1, 2 L2, p>2 p-norm), "
        f"got {type(normalize).__name__}"
    )


def normalize_array(x: npt.ArrayLike, mode: int) -> npt.NDArray[np.float64]:
    """Normalize a vector (1-D) or each row of a matrix (2-D), computing in float64.

    ``mode <= -1`` none; ``0`` ``32760*x/max|x|`` (not rounded); ``1`` L1; ``2`` L2; ``p > 2`` p-norm.
    Rows whose denominator is 0 (and empty inputs) come back unchanged.
    """
    arr = np.asarray(x, dtype=np.float64)
    if mode <= NORM_MODE_NONE or arr.size == 0:
        return arr
    if arr.ndim not in (1, 2):
        raise ValueError(f"normalize_array expects a vector or a matrix, got {arr.ndim} dimensions")
    absx = np.abs(arr)
    if mode == NORM_MODE_MAX_INT16:
        denom = absx.max(axis=-1, keepdims=True) / 32760.0
    elif mode == NORM_MODE_TAXICAB:
        denom = absx.sum(axis=-1, keepdims=True)
    elif mode == NORM_MODE_EUCLIDEAN:
        denom = np.sqrt(np.square(arr).sum(axis=-1, keepdims=True))
    else:
        p = float(mode)
        # Scale by the max first so |x|^p cannot overflow for large p.
        scale = absx.max(axis=-1, keepdims=True)
        safe = np.where(scale > 0, scale, 1.0)
        denom = scale * np.power(np.power(absx / safe, p).sum(axis=-1, keepdims=True), 1.0 / p)
    ok = denom > 0
    return np.where(ok, arr / np.where(ok, denom, 1.0), arr)


def parse_input(input: object, separator: str | None = None) -> tuple[list[Item], bool]:
    """Split ``input`` into items; returns ``(items, batched)``.

    A ``str`` is one item (result unwrapped) unless ``separator`` is a non-empty string, in which case it is
    split with ``str.split`` (empty parts kept) and the result has the batch shape. A list always has the
    batch shape; each item is a ``str`` or a token list (empty, or starting with an int).
    """
    if isinstance(input, str):
        if isinstance(separator, str) and separator:
            return list(input.split(separator)), True
        return [input], False
    if isinstance(input, (list, tuple)):
        items: list[Item] = []
        for item in input:
            if isinstance(item, str):
                items.append(item)
            elif isinstance(item, (list, tuple)) and (
                len(item) == 0 or (isinstance(item[0], (int, np.integer)) and not isinstance(item[0], bool))
            ):
                items.append([int(t) for t in item])
            else:
                raise ValueError("Input item must be str or List[int]")
        return items, True
    raise TypeError(f"input must be a str, a list of str or a list of token lists, got {type(input).__name__}")


def validate_token_ids(tokens: Sequence[int], n_vocab: int) -> None:
    """Raise ``ValueError`` for ids outside ``0 <= id < n_vocab`` (llama.cpp would fail the decode)."""
    for t in tokens:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= int(t) < n_vocab:
            raise ValueError(f"Token id {t!r} is out of range: ids must be ints with 0 <= id < {n_vocab}")


def apply_token_limit(tokens: list[int], limit: int, truncate: bool, keep_final: int = TOKEN_NULL) -> list[int]:
    """Keep the first ``limit`` tokens, or raise if ``truncate`` is False and the input is longer.

    When the input ends with ``keep_final`` (not -1), a cut input still ends with it, as Hugging Face tokenizers
    cut before adding their special tokens: a LAST-pooled model (Qwen3-Embedding) reads its vector at the EOS
    it appends, so the first ``limit - 1`` tokens plus that EOS."""
    if len(tokens) <= limit:
        return tokens
    if truncate:
        if keep_final != TOKEN_NULL and limit >= 2 and tokens[-1] == keep_final:
            return [*tokens[: limit - 1], keep_final]
        return tokens[:limit]
    raise ValueError(f"Requested tokens ({len(tokens)}) exceed batch size of {limit}")


@dataclass(frozen=True)
class BatchPlan:
    """Indices of the inputs decoded together, in the order they go into the batch (seq_id = position)."""

    indices: tuple[int, ...]
    n_tokens: int


def plan_batches(
    lengths: Sequence[int],
    limit: int,
    n_seq_max: int,
    pack_tokens: int | None = None,
    sort_by_length: bool = True,
) -> list[BatchPlan]:
    """Pack inputs of the given token lengths into decode batches.

    Every batch holds at most ``n_seq_max`` inputs and at most ``limit`` tokens; an input is never split
    (each length must be ``<= limit``). ``pack_tokens`` (<= ``limit``) is the target size of a batch of
    several inputs; a single input may exceed it up to ``limit``. Empty inputs (length 0) are left out:
    they need no decode. With ``sort_by_length`` the inputs are packed shortest first, which keeps batches
    dense; otherwise in input order.
    """
    if limit < 1 or n_seq_max < 1:
        raise ValueError(f"limit and n_seq_max must be >= 1 (got {limit}, {n_seq_max})")
    budget = limit if pack_tokens is None else max(1, min(pack_tokens, limit))
    order = [i for i, n in enumerate(lengths) if n > 0]
    for i in order:
        if lengths[i] > limit:
            raise ValueError(f"Requested tokens ({lengths[i]}) exceed batch size of {limit}")
    if sort_by_length:
        order.sort(key=lambda i: lengths[i])
    plans: list[BatchPlan] = []
    current: list[int] = []
    total = 0
    for i in order:
        n = lengths[i]
        if current and (total + n > budget or len(current) == n_seq_max):
            plans.append(BatchPlan(tuple(current), total))
            current, total = [], 0
        current.append(i)
        total += n
    if current:
        plans.append(BatchPlan(tuple(current), total))
    return plans


@dataclass(frozen=True)
class VocabSpecials:
    """What rerank pair building needs of a vocabulary (-1 = the token does not exist)."""

    bos: int
    eos: int
    sep: int
    add_bos: bool
    add_eos: bool
    add_sep: bool


def build_rank_pair(v: VocabSpecials, query: Sequence[int], document: Sequence[int]) -> list[int]:
    """Token layout of a (query, document) pair for a reranker without a ``rerank`` template.

    Follows llama-server's ``format_prompt_rerank``: BOS (if the vocab adds one), query, terminator, SEP (if the
    vocab's add-SEP flag is set), document, terminator. The terminator is EOS, or SEP when the vocab has no EOS
    (then no second SEP follows the query); with neither, it is omitted. -1 is never inserted. BERT gives
    ``[CLS] q [SEP] d [SEP]``, XLM-R ``<s> q </s></s> d </s>``.
    """
    out: list[int] = []
    if v.add_bos and v.bos != TOKEN_NULL:
        out.append(v.bos)
    out.extend(query)
    term = v.eos if v.eos != TOKEN_NULL else v.sep
    if term != TOKEN_NULL:
        out.append(term)
    if v.add_sep and v.sep != TOKEN_NULL and v.eos != TOKEN_NULL:
        out.append(v.sep)
    out.extend(document)
    if term != TOKEN_NULL:
        out.append(term)
    return out


def render_rerank_template(template: str, query: str, document: str) -> str:
    """Fill a ``rerank`` template the way llama.cpp does: ``{query}`` first, then ``{document}`` (so a literal
    ``{document}`` inside the query is replaced too)."""
    return template.replace("{query}", query).replace("{document}", document)


def rank_score(output: npt.ArrayLike | float | None) -> float:
    """The relevance score of one rank output: a scalar as is, else output 0 (two-output heads such as
    Qwen3-Reranker put "yes" first); an empty output scores 0.0. No softmax is applied."""
    if output is None:
        return 0.0
    arr = np.asarray(output, dtype=np.float64).reshape(-1)
    return float(arr[0]) if arr.size else 0.0


def balanced_pack_tokens(total_tokens: int, pack_tokens: int, workers: int, min_pack: int = 64) -> int:
    """Tokens per packed batch when ``workers`` contexts decode batches in parallel: ``pack_tokens``, or less
    when that would leave fewer than two batches per worker (1,500 tokens on 2 workers: 4 batches of ~375
    rather than 3 of 512, where one worker would idle for a third of the time). Never below ``min_pack``."""
    if workers <= 1 or total_tokens <= 0:
        return pack_tokens
    share = -(-total_tokens // (2 * workers))  # ceil
    return max(min(pack_tokens, min_pack), min(pack_tokens, share))


def fair_split(n_first: int, n_second: int, room: int) -> tuple[int, int]:
    """How many tokens of two parts to keep within ``room``: all of both when they fit; otherwise each part
    keeps at least its fair share (half the room, the first part taking the odd token) and a part shorter
    than its share leaves the rest to the other. Both parts keep at least one token when ``room >= 2``."""
    if room < 0:
        raise ValueError(f"room must be >= 0, got {room}")
    if n_first + n_second <= room:
        return n_first, n_second
    first = min(n_first, max((room + 1) // 2, room - n_second))
    return first, min(n_second, room - first)


def rank_pair_overhead(v: VocabSpecials) -> int:
    """Special tokens :func:`build_rank_pair` adds around a query and a document."""
    return len(build_rank_pair(v, [], []))


def rank_pair_within(v: VocabSpecials, query: Sequence[int], document: Sequence[int], limit: int) -> list[int]:
    """``build_rank_pair`` cut to ``limit`` tokens: a short query is kept whole and the document is cut; when
    both are long each keeps a fair share (:func:`fair_split`), so neither side is ever dropped. Raises
    ``ValueError`` when ``limit`` cannot hold the special tokens plus one token of each side."""
    overhead = rank_pair_overhead(v)
    room = limit - overhead
    need = min(len(query), 1) + min(len(document), 1)
    if room < need:
        raise ValueError(
            f"a rerank limit of {limit} tokens cannot hold a query and a document ({overhead} special tokens + "
            f"one token of each); use a limit of at least {overhead + 2}"
        )
    n_q, n_d = fair_split(len(query), len(document), room)
    return build_rank_pair(v, list(query[:n_q]), list(document[:n_d]))


def choose_n_seq_max(n_ubatch: int, cap: int, requested: int | None) -> int:
    """Sequences per decode batch: ``requested`` if it divides ``n_ubatch``, else the largest divisor of
    ``n_ubatch`` up to ``cap`` (llama.cpp reserves its graph with n_ubatch rounded up to a multiple of
    n_seq_max but only n_ubatch outputs; pooled embeddings then trip a GGML_ASSERT that kills the process)."""
    if requested is None:
        top = max(1, min(cap, n_ubatch))
        return max(d for d in range(1, top + 1) if n_ubatch % d == 0)
    if n_ubatch % requested != 0:
        divisors = [d for d in range(1, min(cap, n_ubatch) + 1) if n_ubatch % d == 0]
        raise ValueError(
            f"n_seq_max={requested} must divide n_ubatch={n_ubatch} (llama.cpp aborts otherwise); "
            f"use one of {divisors[-8:]} or change n_ubatch"
        )
    return requested


def cosine_matrix(data: Sequence[Any]) -> list[list[float]] | None:
    """Pairwise cosine similarities of flat vectors of equal length, computed from the vectors themselves
    (never assumed normalized: classifier outputs and unnormalized embeddings get true cosines too); None
    when there are fewer than two vectors or they are not flat vectors of equal length. A zero vector has
    cosine 0 with everything."""
    if len(data) < 2:
        return None
    if not all(isinstance(e, (list, np.ndarray)) and len(e) > 0 for e in data):
        return None
    if len({len(e) for e in data}) != 1:
        return None
    try:
        m = np.asarray(data, dtype=np.float64)
    except (ValueError, TypeError):
        return None
    if m.ndim != 2:
        return None
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    m = np.where(norms > 0, m / np.where(norms > 0, norms, 1.0), 0.0)
    sim = m @ m.T
    if not np.all(np.isfinite(sim)):
        return None
    return [[float(x) for x in row] for row in sim]


def packs_matter(lengths: Sequence[int], candidates: Sequence[int]) -> bool:
    """Whether the pack size changes how ``lengths`` are decoded enough to measure it: several short inputs
    (median at most half the smallest pack) and enough tokens to fill a few of the largest packs. Long inputs go
    alone into a batch whatever the pack; a handful of short ones is one batch either way."""
    if len(lengths) < 4 or not candidates:
        return False
    ordered = sorted(lengths)
    return ordered[len(ordered) // 2] * 2 <= min(candidates) and sum(lengths) >= 4 * max(candidates)


class ThreadChooser:
    """Picks the thread count per decode batch from measured throughput.

    ggml's CPU threads meet at spinning barriers: when another process takes one of the cores, a team of as
    many threads as cores stalls (measured on 2 busy cores: 2 threads 700 tokens/s, 1 thread 2,500), while on
    idle cores more threads are faster. Each candidate's tokens/s is tracked (exponential average) and the
    best is used; another candidate is re-tried once the time spent since its last try is at least
    ``1/explore_share`` times what the try is expected to cost, so exploring costs about ``explore_share``
    of the time whatever the gap. Candidates are first tried fewest threads first: on a busy machine the
    first try of a full team can take many times longer than one thread.

    Decodes of fewer than ``small_tokens`` tokens (a search query) are not recorded, and run on the fewest
    threads unless ``gauge`` (a :class:`indexer.engine.cpu_idle.CoreGauge`) says enough cores are free of
    other work right now and the previous decode ended less than ``warm_gap`` seconds ago: a stalled team
    costs every one of the graph's ~150 barriers (measured on 2 busy cores, an 8-token query: 1 thread p50
    79 ms, 2 threads p50 3.3 s), and so does a core the hypervisor let sleep (2 idle KVM vCPUs, queries 0.2 s
    apart: 2 threads p50 5.6 ms, p90 274 ms; 1 thread 4.5 / 5.6 ms), while on warm idle cores the team halves
    a query (back to back: 1.9 ms against 3.9 ms on 2 Zen 4 vCPUs). A team query that still takes more than
    ``stall_factor`` times the usual one keeps queries off teams for ``backoff`` seconds, doubled at each stall
    in a row up to ``max_backoff`` (work the gauge cannot see, such as this process's own other threads, keeps
    costing one query per period at most), and reset by a team query at its usual speed.
    """

    def __init__(self, candidates: Sequence[int], explore_share: float = 0.04, alpha: float = 0.3,
                 small_tokens: int = 32, gauge: Any = None, stall_factor: float = 4.0,
                 backoff: float = 5.0, warm_gap: float = 0.01, max_backoff: float = 300.0,
                 clock: Any = None) -> None:
        cands = sorted({int(c) for c in candidates if int(c) >= 1}, reverse=True)
        if not cands:
            raise ValueError("ThreadChooser needs at least one thread count >= 1")
        self.candidates = tuple(cands)
        self.explore_share = explore_share
        self.alpha = alpha
        self.small_tokens = small_tokens
        self.rates: dict[int, float] = {}
        self.elapsed = 0.0  # decode seconds recorded so far
        self._last_try: dict[int, float] = {}
        self.gauge = gauge
        self.stall_factor = stall_factor
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._next_backoff = backoff
        self._clock = clock or time.monotonic
        self._small_rate: dict[int, float] = {}  # tokens/s of small decodes per team size
        self._no_team_until = float("-inf")
        self.warm_gap = warm_gap
        self._last_end = float("-inf")  # when the last decode ended

    def _small_threads(self) -> int:
        fewest = self.candidates[-1]
        now = self._clock()
        if self.gauge is None or len(self.candidates) < 2 or now < self._no_team_until:
            return fewest
        if now - self._last_end > self.warm_gap:
            return fewest
        spare = self.gauge.spare()
        if spare is None:
            return fewest
        for c in self.candidates[:-1]:
            if spare >= c - 0.5:
                return c
        return fewest

    def best(self) -> int:
        if not self.rates:
            return self.candidates[0]
        return max(self.rates, key=lambda c: self.rates[c])

    def choose(self, n_tokens: int) -> int:
        if n_tokens < self.small_tokens:
            return self._small_threads()
        for c in reversed(self.candidates):
            if c not in self.rates:
                return c
        best = self.best()
        for c in self.candidates:
            if c == best:
                continue
            expected = n_tokens / self.rates[c]
            if self.elapsed - self._last_try.get(c, 0.0) >= expected / self.explore_share:
                return c
        return best

    def record(self, threads: int, n_tokens: int, seconds: float) -> None:
        self._last_end = self._clock()
        if seconds <= 0 or n_tokens <= 0:
            return
        if n_tokens < self.small_tokens:
            self._record_small(threads, n_tokens, seconds)
            return
        self.elapsed += seconds
        self._last_try[threads] = self.elapsed
        rate = n_tokens / seconds
        old = self.rates.get(threads)
        self.rates[threads] = rate if old is None else (1 - self.alpha) * old + self.alpha * rate


    def _record_small(self, threads: int, n_tokens: int, seconds: float) -> None:
        if self.gauge is None or threads == self.candidates[-1]:
            return
        rate = n_tokens / seconds
        usual = self._small_rate.get(threads)
        if usual is not None and rate * self.stall_factor < usual:
            # stalled: another process (or another thread of ours) took a core
            self._no_team_until = self._clock() + self._next_backoff
            self._next_backoff = min(self.max_backoff, 2 * self._next_backoff)
            return
        self._next_backoff = self.backoff
        self._small_rate[threads] = rate if usual is None else (1 - self.alpha) * usual + self.alpha * rate


class PackChooser(ThreadChooser):
    """Picks the tokens per packed batch from measured throughput, as :class:`ThreadChooser` picks threads: each
    candidate's tokens/s over whole calls where the pack matters (see :func:`packs_matter`), an exponential
    average, the best used and the others re-tried for about ``explore_share`` of the time. Candidates are first
    tried smallest first (the smallest is the measured default, 128)."""

    def __init__(self, candidates: Sequence[int], explore_share: float = 0.05, alpha: float = 0.3) -> None:
        super().__init__(candidates, explore_share=explore_share, alpha=alpha, small_tokens=0)

