"""A broad filter whose matches lie far from the query (indexer.search.fusion.kept): after one fetch that holds too
few matches the search runs once among the listed matches, instead of fetching 4x deeper round after round (which
reached most of the collection); without a listing it still widens until enough match or the store has no more."""

from __future__ import annotations

from indexer.search.fusion import kept
from indexer.types import Hit

ALL = [Hit(f"p{i}", 1.0 - i / 10_000, {}) for i in range(10_000)]  # best first
FAR = {f"p{i}" for i in range(9_000, 9_100)}  # the filter's 100 matches, all far down the ranking


def _fetch(calls: list[int]):
    def fetch(n: int) -> list[Hit]:
        calls.append(n)
        return ALL[:n]
    return fetch


def _keep(ids):
    return {i for i in ids if i in FAR}


def test_far_matches_are_searched_among_once_not_widened_round_after_round():
    fetched: list[int] = []
    among_calls: list[int] = []

    def among(n: int) -> list[Hit]:
        among_calls.append(n)
        return [h for h in ALL if h.id in FAR][:n]

    hits = kept(_fetch(fetched), 10, _keep, share=0.5, among=among)
    assert [h.id for h in hits] == [f"p{i}" for i in range(9_000, 9_010)]  # the exact filtered top 10
    assert fetched == [30] and among_calls == [10]  # one fetch, one search among the matches


def test_without_a_listing_it_widens_until_enough_match():
    fetched: list[int] = []
    hits = kept(_fetch(fetched), 10, _keep, share=0.5)
    assert [h.id for h in hits] == [f"p{i}" for i in range(9_000, 9_010)]
    assert fetched[0] == 30 and fetched[-1] >= 9_010
    assert all(b == a * 4 for a, b in zip(fetched, fetched[1:], strict=False))


def test_a_first_fetch_that_holds_enough_never_lists():
    near = {f"p{i}" for i in range(0, 10_000, 2)}
    among_calls: list[int] = []
    hits = kept(_fetch([]), 10, lambda ids: {i for i in ids if i in near}, share=0.5,
                among=lambda n: among_calls.append(n) or [])
    assert [h.id for h in hits] == [f"p{i}" for i in range(0, 20, 2)] and among_calls == []
