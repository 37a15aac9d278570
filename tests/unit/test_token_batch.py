"""TokenBatch: the numpy-backed llama_batch (needs the llama.cpp library, not a model)."""

from __future__ import annotations

import ctypes

import pytest

from indexer.engine.llama_embedding import TokenBatch


def test_batch_capacity_error_text() -> None:
    b = TokenBatch(16, 1)
    b.add_sequence([5, 6], 0)
    with pytest.raises(ValueError) as err:
        b.add_sequence([7], 1)
    msg = str(err.value)
    for part in (
        "LlamaBatch.add_sequence",
        "seq_id=1 exceeds the configured sequence capacity",
        "n_seq_max=1",
        "valid IDs are 0 through 0",
        "n_seq_max>=2",
        "LlamaEmbedding",
        "seq_id=0",
    ):
        assert part in msg


def test_batch_capacity_two() -> None:
    b = TokenBatch(16, 2)
    b.add_sequence([1], 0)
    b.add_sequence([2], 1)
    with pytest.raises(ValueError, match=r"valid IDs are 0 through 1.*n_seq_max>=3"):
        b.add_sequence([3], 2)


@pytest.mark.parametrize("bad", [-1, True, 1.0, "0"])
def test_batch_rejects_bad_seq_ids(bad: object) -> None:
    with pytest.raises(ValueError):
        TokenBatch(8, 4).add_sequence([1], bad)  # type: ignore[arg-type]


def test_batch_overflow_and_array_mismatch() -> None:
    b = TokenBatch(4, 2)
    b.add_sequence([1, 2, 3], 0)
    with pytest.raises(ValueError, match="overflows the batch capacity of 4"):
        b.add_sequence([4, 5], 1)
    with pytest.raises(ValueError, match="array lengths differ"):
        b.add([1], [0, 1], [0], [True])
    with pytest.raises(ValueError, match="empty"):
        b.add([], [], [], [])
    with pytest.raises(ValueError, match="empty token list"):
        b.add_sequence([], 0)


def test_batch_struct_sees_the_filled_arrays() -> None:
    b = TokenBatch(8, 2)
    b.add_sequence([11, 12, 13], 0)
    b.add_sequence([21, 22], 1)
    s = b.batch
    assert s.n_tokens == 5
    assert [s.token[i] for i in range(5)] == [11, 12, 13, 21, 22]
    assert [s.pos[i] for i in range(5)] == [0, 1, 2, 0, 1]
    assert [s.seq_id[i][0] for i in range(5)] == [0, 0, 0, 1, 1]
    assert [s.n_seq_id[i] for i in range(5)] == [1] * 5
    assert [s.logits[i] for i in range(5)] == [1] * 5  # every token is an output
    assert not ctypes.cast(s.embd, ctypes.c_void_p).value
    b.reset()
    assert s.n_tokens == 0 and b.n_tokens == 0


