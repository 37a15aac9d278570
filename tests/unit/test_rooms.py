"""Rooms a newcomer can hold in mind (issue 29): no module over 600 lines but the allow-listed ones (each one long
concern), a thin ``Collection``, no import cycle (type-only imports included), and one codec for a search request
and hit that the HTTP schema, the MCP answer and the CLI printer agree with."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600

# name -> (lines at most, the one concern that makes it long); raise a number only with a reason
ALLOWED_LONG = {
    "indexer/engine/llama_embedding.py": (
        795, "the llama.cpp engine: contexts, batches, pooling (its TokenBatch in engine/token_batch.py, its argument "
        "checks in engine/arguments.py, tokenization in engine/tokenization.py; issue 43: 965 -> 795)"
    ),
    "indexer/index/chunking.py": (
        690, "token-aware chunking: blocks, exact counts, packing and overlap (one algorithm, one pass per document)"
    ),
    "plugins/filesystem/source.py": (
        643, "the filesystem scan: roots, ignore files, symlinks, per-path refs, claims and reading (+10 for the rules "
        "asked of a link's target, issue 41; +1 for inheriting the Source port, issue 43; +11 for a read's job for a "
        "Ray node, issue 47)"
    ),
}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_600_lines_except_the_allow_listed():
    too_long = {}
    for package in ("indexer", "plugins"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            limit = ALLOWED_LONG.get(rel, (MAX_LINES, ""))[0]
            if _lines(path) > limit:
                too_long[rel] = _lines(path)
    assert not too_long, f"split these rooms (or allow-list them with their one concern): {too_long}"


@pytest.mark.parametrize("rel", sorted(ALLOWED_LONG))
def test_the_allow_list_names_existing_long_modules_with_a_concern(rel):
    path = ROOT / rel
    assert path.exists(), f"{rel} is gone: take it off the allow-list"
    limit, concern = ALLOWED_LONG[rel]
    assert _lines(path) > MAX_LINES - 100, f"{rel} is short now: take it off the allow-list"
    assert concern and limit > MAX_LINES


def test_collection_is_a_thin_composition():
    tree = ast.parse((ROOT / "indexer/collection/facade.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Collection")
    assert cls.end_lineno is not None
    assert cls.end_lineno - cls.lineno + 1 < 200


def test_no_import_cycle_with_type_only_imports_counted():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "import_cycles.py")], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no import cycles" in proc.stdout


def test_one_codec_for_hits_agrees_with_the_hit_the_schema_and_the_printer():
    from indexer.cli.results import hit_dict
    from indexer.codec import HIT_FIELDS, decode_hit, hit_json
    from indexer.server.schemas import HitOut
    from indexer.types import SearchHit

    assert [f.name for f in dataclasses.fields(SearchHit)] == list(HIT_FIELDS)
    assert set(HitOut.model_fields) == set(HIT_FIELDS)
    hit = SearchHit(path="/a.md", score=0.5, rerank_score=None, text="t", start_line=1, end_line=2, page=None,
                    heading=("H",), chunk_id="c", locator="slide 1", location={"slide": 1}, metadata={"a": "b"})
    data = hit_json(hit)
    assert data == hit.to_dict() == hit_dict(data)
    assert decode_hit(data) == hit
    assert HitOut(**data).model_dump() == data


def test_one_codec_for_requests_agrees_with_the_request_and_the_schema():
    from indexer.codec import REQUEST_FIELDS, decode_request, request_json
    from indexer.errors import InputError
    from indexer.server.schemas import SearchBody
    from indexer.types import SearchRequest

    assert {f.name for f in dataclasses.fields(SearchRequest)} == set(REQUEST_FIELDS)
    assert set(SearchBody.model_fields) == {*REQUEST_FIELDS, "collection"}
    request = SearchRequest("q", k=3, path_prefix="/x", file_types=("md",), rerank=False, metadata=(("a", "b"),))
    body = request_json(request)
    assert decode_request(body) == request
    assert decode_request(SearchBody(collection="c", **body)) == request
    with pytest.raises(InputError, match="relative"):
        decode_request({"query": "q", "path_prefix": "rel/dir"})


def test_one_codec_for_results_round_trips():
    from indexer.codec import RESULT_FIELDS, decode_result, result_json
    from indexer.server.schemas import SearchOut
    from indexer.types import SearchHit, SearchResult

    hit = SearchHit("/a.md", 0.5, 0.9, "t", 1, 2, 3, ("H",), "c")
    result = SearchResult((hit,), True, "ranked by x", {"embed": 1.5}, "hybrid", 4, "a warning")
    data = result_json(result, "docs")
    assert set(data) == {"collection", *RESULT_FIELDS} == set(SearchOut.model_fields)
    assert decode_result(data) == result
    assert result_json(result) == result.to_dict()
