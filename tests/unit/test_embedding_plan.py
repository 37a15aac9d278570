"""Pure logic of the engine (indexer.engine.plan, no llama.cpp): normalization, input parsing, packing,
token budgets, rank pairs, cosine matrix, thread choice."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from indexer.engine.plan import (
    NORM_MODE_EUCLIDEAN,
    NORM_MODE_MAX_INT16,
    NORM_MODE_NONE,
    NORM_MODE_PNORM,
    NORM_MODE_TAXICAB,
    PackChooser,
    ThreadChooser,
    VocabSpecials,
    apply_token_limit,
    balanced_pack_tokens,
    build_rank_pair,
    choose_n_seq_max,
    cosine_matrix,
    fair_split,
    normalize_array,
    packs_matter,
    parse_input,
    plan_batches,
    rank_pair_within,
    rank_score,
    render_rerank_template,
    resolve_norm_mode,
    validate_token_ids,
)

# ---------------------------------------------------------------- normalization


def test_resolve_norm_mode_maps_bools_before_ints() -> None:
    assert resolve_norm_mode(True) == NORM_MODE_EUCLIDEAN
    assert resolve_norm_mode(False) == NORM_MODE_NONE
    assert resolve_norm_mode(1) == NORM_MODE_TAXICAB
    assert resolve_norm_mode(np.int64(6)) == 6
    with pytest.raises(TypeError):
        resolve_norm_mode(2.0)
    with pytest.raises(TypeError):
        resolve_norm_mode("2")


VEC = np.array([3.0, -4.0, 0.5, 12.0, -0.25])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (NORM_MODE_NONE, VEC),
        (-5, VEC),
        (NORM_MODE_MAX_INT16, 32760.0 * VEC / np.abs(VEC).max()),
        (NORM_MODE_TAXICAB, VEC / np.abs(VEC).sum()),
        (NORM_MODE_EUCLIDEAN, VEC / np.linalg.norm(VEC)),
        (3, VEC / (np.abs(VEC) ** 3).sum() ** (1 / 3)),
        (NORM_MODE_PNORM, VEC / (np.abs(VEC) ** 6).sum() ** (1 / 6)),
    ],
)
def test_normalize_modes_match_numpy(mode: int, expected: np.ndarray) -> None:
    got = normalize_array(VEC, mode)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_max_int16_is_not_rounded() -> None:
    got = normalize_array([1.0, 3.0], NORM_MODE_MAX_INT16)
    assert got[0] == pytest.approx(10920.0)
    assert got[1] == pytest.approx(32760.0)
    got = normalize_array([1.0, 7.0], NORM_MODE_MAX_INT16)
    assert got[0] == pytest.approx(32760.0 / 7.0)  # 4680.0, exact float division, no rounding
    assert got[0] != round(got[0]) or 32760 % 7 == 0


@pytest.mark.parametrize("mode", [0, 1, 2, 3, 6])
def test_zero_and_empty_vectors_come_back_unchanged(mode: int) -> None:
    np.testing.assert_array_equal(normalize_array(np.zeros(4), mode), np.zeros(4))
    assert normalize_array(np.zeros(0), mode).size == 0


def test_matrix_rows_are_normalized_separately_and_zero_rows_kept() -> None:
    m = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]])
    got = normalize_array(m, NORM_MODE_EUCLIDEAN)
    np.testing.assert_allclose(got, [[0.6, 0.8], [0.0, 0.0], [1.0, 0.0]])


def test_large_p_norm_does_not_overflow() -> None:
    v = np.array([1e200, 2e200, -3e200])
    got = normalize_array(v, 50)
    assert np.all(np.isfinite(got))
    expected = v / np.abs(v).max() / ((np.abs(v) / np.abs(v).max()) ** 50).sum() ** (1 / 50)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# ---------------------------------------------------------------- input parsing


def test_parse_input_shapes_and_separator() -> None:
    assert parse_input("a b") == (["a b"], False)
    assert parse_input("a|b||c", separator="|") == (["a", "b", "", "c"], True)
    assert parse_input("a|b", separator="") == (["a|b"], False)  # empty separator: no split
    assert parse_input("a|b", separator=None) == (["a|b"], False)
    assert parse_input(["only"]) == (["only"], True)
    assert parse_input([]) == ([], True)
    assert parse_input([[1, 2], [], "x"]) == ([[1, 2], [], "x"], True)


@pytest.mark.parametrize("bad", [[1, 2, 3], [["a"]], [None], [3.0], [[True, 1]]])
def test_parse_input_rejects_bad_items(bad: list[object]) -> None:
    with pytest.raises(ValueError, match=r"Input item must be str or List\[int\]"):
        parse_input(bad)


def test_parse_input_rejects_non_sequences() -> None:
    with pytest.raises(TypeError):
        parse_input(42)


def test_token_ids_are_range_checked() -> None:
    validate_token_ids([0, 5, 9], 10)
    for bad in ([10], [-1], [1, 2, 99]):
        with pytest.raises(ValueError, match="out of range"):
            validate_token_ids(bad, 10)


def test_truncation_and_error_text() -> None:
    assert apply_token_limit([1, 2, 3], 5, False) == [1, 2, 3]
    assert apply_token_limit([1, 2, 3, 4], 2, True) == [1, 2]
    with pytest.raises(ValueError) as err:
        apply_token_limit(list(range(7)), 4, False)
    assert str(err.value) == "Requested tokens (7) exceed batch size of 4"


# ---------------------------------------------------------------- packing plan


def _check_plan(lengths: list[int], limit: int, n_seq_max: int, **kw: object) -> list[tuple[int, ...]]:
    plans = plan_batches(lengths, limit, n_seq_max, **kw)  # type: ignore[arg-type]
    seen = [i for p in plans for i in p.indices]
    assert sorted(seen) == [i for i, n in enumerate(lengths) if n > 0]  # each non-empty input exactly once
    for p in plans:
        assert len(p.indices) <= n_seq_max
        assert p.n_tokens == sum(lengths[i] for i in p.indices) <= limit
    return [p.indices for p in plans]


def test_n_seq_max_one_decodes_one_input_per_batch() -> None:
    assert _check_plan([3, 4, 5], 100, 1, sort_by_length=False) == [(0,), (1,), (2,)]


def test_n_seq_max_two_and_token_limit_flush() -> None:
    assert _check_plan([3, 4, 5, 6, 7], 100, 2, sort_by_length=False) == [(0, 1), (2, 3), (4,)]
    # token limit: 6 + 5 > 10 flushes before adding
    assert _check_plan([6, 5, 4, 1], 10, 8, sort_by_length=False) == [(0,), (1, 2, 1 + 2)]


def test_empty_inputs_need_no_decode() -> None:
    assert _check_plan([0, 2, 0, 3], 10, 4, sort_by_length=False) == [(1, 3)]
    assert plan_batches([0, 0], 10, 4) == []


def test_sorting_packs_shortest_first() -> None:
    plans = _check_plan([9, 1, 8, 2, 7, 3], 12, 8)
    assert plans[0] == (1, 3, 5)  # 1 + 2 + 3 tokens
    assert all(sum([9, 1, 8, 2, 7, 3][i] for i in p) <= 12 for p in plans)


def test_pack_tokens_caps_multi_input_batches_but_not_single_inputs() -> None:
    plans = _check_plan([4, 4, 4, 30], 32, 8, pack_tokens=8, sort_by_length=False)
    assert plans == [(0, 1), (2,), (3,)]


def test_plan_rejects_inputs_over_the_limit() -> None:
    with pytest.raises(ValueError, match=r"Requested tokens \(11\) exceed batch size of 10"):
        plan_batches([3, 11], 10, 2)


# ---------------------------------------------------------------- rank pairs

BERT_LLAMA_DEFAULTS = VocabSpecials(bos=101, eos=-1, sep=102, add_bos=True, add_eos=False, add_sep=True)
BERT_HF_CONVERTED = VocabSpecials(bos=101, eos=102, sep=102, add_bos=True, add_eos=True, add_sep=False)
XLMR = VocabSpecials(bos=0, eos=2, sep=2, add_bos=True, add_eos=True, add_sep=True)
NO_EOS_NO_SEP = VocabSpecials(bos=1, eos=-1, sep=-1, add_bos=True, add_eos=False, add_sep=False)
NOTHING = VocabSpecials(bos=-1, eos=-1, sep=-1, add_bos=True, add_eos=True, add_sep=True)
Q, D = [7, 8], [9, 10, 11]


@pytest.mark.parametrize(
    ("vocab", "expected"),
    [
        (BERT_LLAMA_DEFAULTS, [101, 7, 8, 102, 9, 10, 11, 102]),  # [CLS] q [SEP] d [SEP], EOS missing
        (BERT_HF_CONVERTED, [101, 7, 8, 102, 9, 10, 11, 102]),
        (XLMR, [0, 7, 8, 2, 2, 9, 10, 11, 2]),  # <s> q </s></s> d </s>
        (NO_EOS_NO_SEP, [1, 7, 8, 9, 10, 11]),
        (NOTHING, [7, 8, 9, 10, 11]),
    ],
)
def test_rank_pair_layouts(vocab: VocabSpecials, expected: list[int]) -> None:
    pair = build_rank_pair(vocab, Q, D)
    assert pair == expected
    assert -1 not in pair


@pytest.mark.parametrize("vocab", [BERT_LLAMA_DEFAULTS, XLMR, NO_EOS_NO_SEP])
def test_rank_pair_is_cut_in_the_document_part(vocab: VocabSpecials) -> None:
    q, d = list(range(100, 105)), list(range(200, 300))
    pair = rank_pair_within(vocab, q, d, 20)
    keep = 20 - len(build_rank_pair(vocab, q, []))
    assert pair == build_rank_pair(vocab, q, d[:keep])  # whole query, document head, terminator kept
    assert len(pair) == 20
    assert -1 not in pair


def test_long_query_keeps_room_for_the_document() -> None:
    q, d = list(range(100, 200)), list(range(200, 300))
    pair = rank_pair_within(XLMR, q, d, 24)
    assert len(pair) == 24
    assert sum(1 for t in pair if 200 <= t < 300) >= 9  # half of the 20 content tokens, give or take


def test_rerank_template_replaces_query_then_document() -> None:
    t = "<q>{query}</q><d>{document}</d>"
    assert render_rerank_template(t, "why?", "because") == "<q>why?</q><d>because</d>"
    # sequential like llama.cpp: a literal {document} in the query is replaced as well
    assert render_rerank_template(t, "a {document}", "B") == "<q>a B</q><d>B</d>"


def test_rank_score_uses_output_zero_without_softmax() -> None:
    assert rank_score(np.array([2.5], dtype=np.float32)) == 2.5
    assert rank_score(np.array([0.9, 0.1], dtype=np.float32)) == pytest.approx(0.9)  # n_cls_out 2 -> output 0
    assert rank_score(np.array([-3.0, 7.0])) == -3.0
    assert rank_score(None) == 0.0
    assert rank_score(np.zeros(0)) == 0.0


def test_tiny_rank_limit_keeps_a_share_of_both_sides() -> None:
    # before: with one token of room the query was dropped entirely ([CLS] [SEP] d0 [SEP])
    q, d = list(range(1000, 1050)), list(range(2000, 2100))
    overhead = len(build_rank_pair(BERT_LLAMA_DEFAULTS, [], []))
    for room in (2, 3, 4, 5, 9):
        pair = rank_pair_within(BERT_LLAMA_DEFAULTS, q, d, overhead + room)
        n_q = sum(1 for t in pair if 1000 <= t < 1050)
        n_d = sum(1 for t in pair if 2000 <= t < 2100)
        assert len(pair) == overhead + room
        assert n_q >= room // 2 and n_d >= room // 2 and n_q + n_d == room, (room, n_q, n_d)
        assert pair[: 1 + n_q] == [BERT_LLAMA_DEFAULTS.bos, *q[:n_q]]  # heads of both sides, in order


def test_rank_limit_too_small_for_both_sides_is_refused() -> None:
    overhead = len(build_rank_pair(BERT_LLAMA_DEFAULTS, [], []))
    for limit in (1, overhead, overhead + 1):
        with pytest.raises(ValueError, match=f"at least {overhead + 2}"):
            rank_pair_within(BERT_LLAMA_DEFAULTS, [7, 8], [9, 10], limit)
    assert rank_pair_within(BERT_LLAMA_DEFAULTS, [], [9, 10], overhead + 1) == build_rank_pair(
        BERT_LLAMA_DEFAULTS, [], [9]
    )


@pytest.mark.parametrize(
    ("n_first", "n_second", "room", "expected"),
    [(3, 4, 10, (3, 4)), (100, 100, 20, (10, 10)), (100, 100, 5, (3, 2)), (2, 100, 10, (2, 8)),
     (100, 3, 10, (7, 3)), (100, 100, 1, (1, 0)), (0, 50, 4, (0, 4)), (5, 5, 0, (0, 0))],
)
def test_fair_split(n_first: int, n_second: int, room: int, expected: tuple[int, int]) -> None:
    assert fair_split(n_first, n_second, room) == expected


def test_cosine_matrix_is_a_true_cosine_for_unnormalized_outputs() -> None:
    # before: with the default normalize mode the rows were assumed unit length, so a multi-output
    # classification head (never normalized) got raw dot products labelled as cosines (here 25 and 100)
    sim = np.array(cosine_matrix([[3.0, 4.0], [6.0, 8.0], [4.0, -3.0]]))
    np.testing.assert_allclose(sim, [[1, 1, 0], [1, 1, 0], [0, 0, 1]], atol=1e-12)
    assert cosine_matrix([[0.0, 0.0], [1.0, 0.0]]) == [[0.0, 0.0], [0.0, 1.0]]
    assert cosine_matrix([[1.0, 2.0]]) is None
    assert cosine_matrix([[1.0, 2.0], [1.0]]) is None
    assert cosine_matrix([1.5, 2.5]) is None  # scalar scores have no cosine


def test_n_seq_max_choice_divides_n_ubatch() -> None:
    assert choose_n_seq_max(512, 256, None) == 256
    assert choose_n_seq_max(512, 100, None) == 64
    assert choose_n_seq_max(96, 256, None) == 96
    assert choose_n_seq_max(512, 256, 8) == 8
    with pytest.raises(ValueError, match=r"n_seq_max=7 must divide n_ubatch=512"):
        choose_n_seq_max(512, 256, 7)


def test_plan_module_imports_without_llama_cpp() -> None:
    code = "import sys, indexer.engine.plan; assert 'llama_cpp' not in sys.modules, 'llama_cpp imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------- thread choice


def _drive(chooser: ThreadChooser, speed: dict[int, float], batches: int, n_tokens: int = 512) -> list[int]:
    picks = []
    for _ in range(batches):
        t = chooser.choose(n_tokens)
        picks.append(t)
        chooser.record(t, n_tokens, n_tokens / speed[t])
    return picks


def test_thread_chooser_tries_each_then_keeps_the_fastest() -> None:
    c = ThreadChooser([2, 1])
    picks = _drive(c, {2: 5000.0, 1: 2700.0}, 200)
    assert picks[:2] == [1, 2]  # fewest threads first: a full team's first try may stall on a busy machine
    assert c.best() == 2
    assert 0 < picks[2:].count(1) < 10  # re-tried now and then, cheaply


def test_thread_chooser_limits_exploration_cost_when_a_team_stalls() -> None:
    c = ThreadChooser([2, 1], explore_share=0.04)
    speed = {2: 400.0, 1: 2500.0}  # a busy machine: the full team stalls at barriers
    picks = _drive(c, speed, 300)
    time_on_2 = sum(512 / speed[2] for p in picks[2:] if p == 2)
    total = sum(512 / speed[p] for p in picks[2:])
    assert c.best() == 1
    assert time_on_2 / total < 0.08


def test_thread_chooser_follows_a_change_in_load() -> None:
    c = ThreadChooser([2, 1])
    _drive(c, {2: 400.0, 1: 2500.0}, 50)
    assert c.best() == 1
    _drive(c, {2: 5000.0, 1: 2600.0}, 400)  # the other process finished
    assert c.best() == 2


def test_small_decodes_run_on_one_thread_and_are_not_recorded() -> None:
    # before: a single query could be decoded by a full team; on 2 busy cores an 8-token query then took
    # 3.3 s (p50) instead of 79 ms on one thread
    c = ThreadChooser([2, 1], small_tokens=32)
    assert {c.choose(n) for n in (1, 8, 31)} == {1}
    c.record(1, 8, 0.001)
    assert c.rates == {} and c.elapsed == 0.0
    _drive(c, {2: 5000.0, 1: 2700.0}, 20)
    assert c.best() == 2 and c.choose(12) == 1 and c.choose(512) == 2


def test_balanced_pack_gives_every_parallel_context_work() -> None:
    assert balanced_pack_tokens(1500, 512, 1) == 512  # one context: the measured default
    assert balanced_pack_tokens(1500, 512, 2) == 375  # 4 batches for 2 contexts, not 3 of 512
    assert balanced_pack_tokens(100_000, 512, 2) == 512
    assert balanced_pack_tokens(40, 512, 2) == 64  # never tiny batches
    assert balanced_pack_tokens(40, 32, 2) == 32
    assert balanced_pack_tokens(0, 512, 2) == 512


# ---------------------------------------------------------------- pack choice


def test_pack_chooser_tries_the_default_first_then_keeps_the_fastest() -> None:
    c = PackChooser([256, 128])
    picks = _drive(c, {128: 5200.0, 256: 5600.0}, 200, n_tokens=4096)
    assert picks[:2] == [128, 256]  # 128, the measured default, before any other
    assert c.best() == 256
    assert 0 < picks[2:].count(128) < 15


def test_pack_chooser_keeps_the_default_where_it_wins() -> None:
    c = PackChooser([128, 256])
    _drive(c, {128: 9000.0, 256: 4700.0}, 100, n_tokens=4096)  # the Intel Xeon's short queries before the patches
    assert c.best() == 128


def test_packs_matter_only_for_many_short_inputs() -> None:
    packs = (128, 256)
    assert packs_matter([15] * 200, packs)  # queries: the pack decides how many share a batch
    assert not packs_matter([200] * 200, packs)  # chunks near the pack go alone whatever it is
    assert not packs_matter([15] * 3, packs)  # one batch either way
    assert not packs_matter([15] * 40, packs)  # 600 tokens: too few to fill four of the largest packs
    assert not packs_matter([15] * 100, [])

