"""Claims of README.md and docs/ that had code doing them but no test holding them (the claims table of issue 41,
notes/issue-41-claims.md), each tried with the real model and real files: the README tour's `--under`, `--path`
and `--type`, the one `--json` shape of `indexer search`, and the caps of `/v1/embeddings` (docs/server.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.corpus import DOCS, write_corpus

EXTRA = {
    "baking/notes/rye.md": "# Rye bread\n\nRye dough is sticky; bake the rye loaf longer in a cooler oven.\n",
    "baking/notes/rye.txt": "Rye bread keeps for a week wrapped in linen; slice the rye loaf thin.\n",
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "indexer.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "INDEXER_THREADS": "2"}, timeout=600)


@pytest.mark.slow
def test_search_under_a_folder_by_glob_and_type_with_one_json_shape(tmp_path: Path, embed_model_path: Path) -> None:
    """README: `indexer search "..." --under ~/notes --path '*.md' --no-rerank`, `--type md --json`; docs/search.md:
    `--json` prints one object whatever the options, `matched` null without a clause beyond path and type."""
    corpus = write_corpus(tmp_path / "corpus", {**DOCS, **EXTRA})
    indexed = run("index", str(corpus))
    assert indexed.returncode == 0, indexed.stderr

    def search(*extra: str) -> dict:
        done = run("search", "baking a rye loaf of bread", "--local", "--json", "--no-rerank", "-k", "10", *extra)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    everywhere = search()
    assert set(everywhere) == {"hits", "matched", "facets", "where", "filter_note"}
    assert everywhere["matched"] is None and everywhere["filter_note"] is None
    assert {Path(h["path"]).name for h in everywhere["hits"]} >= {"bread.md", "rye.md", "rye.txt"}

    under = search("--under", str(corpus / "baking" / "notes"))
    assert {Path(h["path"]).name for h in under["hits"]} == {"rye.md", "rye.txt"}
    assert under["matched"] is None  # a path prefix is no clause beyond path and type

    globbed = search("--under", str(corpus / "baking"), "--path", "*.md")
    assert {Path(h["path"]).name for h in globbed["hits"]} == {"bread.md", "rye.md"}

    typed = search("--type", "txt")
    assert {Path(h["path"]).name for h in typed["hits"]} == {"planets.txt", "rye.txt"}
    assert set(typed) == set(everywhere)


def test_v1_embeddings_caps_dimensions_and_tokens_per_request(embed_model_path: Path) -> None:
    """docs/server.md: `dimensions` refused unless it is the model's width; `max_request_tokens` per
    `/v1/embeddings` call and the model's limit per input, each a 400 naming the cap (the rules the service
    applies, on the real model)."""
    from indexer.collection.served_models import ServedModels
    from indexer.errors import InputError
    from indexer.settings import Settings

    served = ServedModels(Settings(embed_model=str(embed_model_path), threads=2, max_request_tokens=40))
    try:
        width = served.embedder.dimensions
        assert served.check_embed(["a short sentence"], None, dimensions=width) > 0
        with pytest.raises(InputError, match=f"dimensions={width // 2} is not supported"):
            served.check_embed(["a short sentence"], None, dimensions=width // 2)
        with pytest.raises(InputError, match="max_request_tokens"):
            served.check_embed(["twelve words in this sentence make it longer than it needs to be"] * 3, None)
        limit = served.embedder.max_tokens
        with pytest.raises(InputError, match=f"at most {limit} per input"):
            served.check_embed([list(range(1000, 1000 + limit + 1))], None)
    finally:
        served.close()


def test_a_store_without_the_lexical_port_searches_dense_and_lexical_says_so(tmp_path: Path,
                                                                            embed_model_path: Path) -> None:
    """docs/search.md: a third-party store without the lexical index still works in `dense` mode (the default
    hybrid search runs dense, with a warning), and `--mode lexical|hybrid` then says so (the suite's `tiny` store,
    registered through entry points only)."""
    import indexer
    from indexer.errors import InputError

    corpus = write_corpus(tmp_path / "corpus")
    with indexer.open_collection("plain", store="tiny") as col:
        col.index([corpus])
        hits = col.search("how do I bake bread", k=2).hits
        assert Path(hits[0].path).name == "bread.md"
        assert "keeps no lexical index" in col.lexical_hint()
        for mode in ("lexical", "hybrid"):
            with pytest.raises(InputError, match="does not keep; use mode 'dense'"):
                col.search("bread", mode=mode)
