"""The int8 rows by id behind FAISS's pq codes (plugins/faiss/rows.py): every operation against a dict model."""

from __future__ import annotations

import numpy as np
import pytest

from plugins.faiss.rows import Int8Rows


def _rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    return rng.integers(-128, 128, (n, dim)).astype(np.int8)


def test_adds_removals_and_replacements_match_a_dict_through_compactions() -> None:
    rng = np.random.default_rng(3)
    dim = 8
    rows = Int8Rows(dim)
    model: dict[int, np.ndarray] = {}
    for step in range(60):
        ids = rng.choice(np.arange(0, 5050) * 7919 + 2**40, size=int(rng.integers(1, 300)), replace=True)  # repeats too
        new = _rows(rng, len(ids), dim)
        rows.add(ids, new)
        for i, r in zip(ids.tolist(), new, strict=True):
            model[i] = r  # the last of repeated ids wins
        gone = rng.choice(np.array(sorted(model)), size=min(len(model), int(rng.integers(0, 400))), replace=False)
        rows.remove(np.concatenate([gone, np.array([123456789, -1, 2**40 + 3])]))  # absent ids are ignored
        for i in gone.tolist():
            del model[i]
        assert len(rows) == len(model) and rows.used - len(rows) <= max(1024, len(rows) // 4), step
    asked = np.array([*list(model)[:500], 42, -7, -1])
    got, there = rows.get(asked)
    assert there.tolist() == [i in model for i in asked.tolist()]
    np.testing.assert_array_equal(got, np.array([model[i] for i in asked.tolist() if i in model]))
    with pytest.raises(ValueError, match="negative id"):
        rows.add(np.array([5, -1]), _rows(rng, 2, dim))
    assert len(rows) == len(model)  # nothing of a refused add went in


def test_a_removed_id_is_gone_though_the_map_still_names_its_old_slot() -> None:
    rows = Int8Rows(4)
    rows.add(np.array([10, 20, 30]), np.arange(12).reshape(3, 4))
    rows.remove(np.array([20]))
    got, there = rows.get(np.array([20, 30, 10]))
    assert there.tolist() == [False, True, True]
    np.testing.assert_array_equal(got, [[8, 9, 10, 11], [0, 1, 2, 3]])
    rows.add(np.array([20]), np.full((1, 4), 7))  # back, in a new slot
    np.testing.assert_array_equal(rows.get(np.array([20]))[0], [[7, 7, 7, 7]])
    assert len(rows) == 3 and rows.used == 4
    back = Int8Rows.from_bytes(rows.to_bytes(), 4)  # the garbage slot left out, the ids in order
    assert back.used == 3 and back.slot_id.tolist() == [10, 20, 30]
    np.testing.assert_array_equal(back.get(np.array([30, 20]))[0], [[8, 9, 10, 11], [7, 7, 7, 7]])


def test_serialized_rows_come_back_equal_and_bad_bytes_are_refused() -> None:
    rng = np.random.default_rng(4)
    rows = Int8Rows(16)
    ids = rng.choice(10**12, size=2000, replace=False)
    rows.add(ids, _rows(rng, 2000, 16))
    rows.remove(ids[:1500])  # garbage that to_bytes leaves out
    blob = rows.to_bytes()
    back = Int8Rows.from_bytes(blob, 16)
    assert len(back) == 500 and len(blob) == 12 + 500 * (8 + 16)
    np.testing.assert_array_equal(back.get(ids[1500:])[0], rows.get(ids[1500:])[0])
    for bad, dim in ((blob[:-1], 16), (blob, 8), (blob[:5], 16)):
        with pytest.raises(ValueError, match="int8 rows"):
            Int8Rows.from_bytes(bad, dim)
    empty = Int8Rows.from_bytes(Int8Rows(4).to_bytes(), 4)
    assert len(empty) == 0 and not empty.get(np.array([1]))[1].any()
