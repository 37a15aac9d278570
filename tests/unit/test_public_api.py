"""The public API of docs/api.md: every name it lists imports from its path, and so does every
``from indexer... import ...`` the README and docs/ show (a move must leave documented paths working)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"
_ROW = re.compile(r"^\| `(indexer[\w.]*)` \| (.+) \|$")
_IMPORT = re.compile(r"^\s*from (indexer[\w.]*) import \(?([\w ,]+)\)?\s*(?:#.*)?$", re.M)
_NAME = re.compile(r"`(\w+)`")


def _listed() -> list[tuple[str, str]]:
    pairs = []
    for line in API.read_text().splitlines():
        m = _ROW.match(line)
        if m:
            # names in a row's own cell; a "(code in `indexer.x`)" note names a module, not a name
            cell = re.sub(r"\(code in `[\w.]+`\)|\(the seed's class; code in `[\w.]+`\)", "", m.group(2))
            pairs += [(m.group(1), n) for n in _NAME.findall(cell) if not n.startswith("indexer")]
    return pairs


def _documented_imports() -> list[tuple[str, str, str]]:
    out = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in _IMPORT.finditer(doc.read_text()):
            for name in (n.strip() for n in m.group(2).split(",")):
                if name:
                    out.append((doc.name, m.group(1), name.split(" as ")[0]))
    return out


LISTED = _listed()
DOCUMENTED = _documented_imports()


def test_the_page_lists_the_public_api():
    modules = {m for m, _ in LISTED}
    assert {"indexer", "indexer.plugin_api", "indexer.llama_embedding", "indexer.models"} <= modules
    assert len(LISTED) > 100


@pytest.mark.parametrize(("module", "name"), LISTED, ids=[f"{m}:{n}" for m, n in LISTED])
def test_every_listed_name_imports(module, name):
    assert hasattr(importlib.import_module(module), name), f"docs/api.md lists {module}.{name}; it is not there"


@pytest.mark.parametrize(("doc", "module", "name"), DOCUMENTED, ids=[f"{d}:{m}:{n}" for d, m, n in DOCUMENTED])
def test_every_documented_import_works(doc, module, name):
    assert hasattr(importlib.import_module(module), name), f"{doc} imports {name} from {module}"


def test_the_readme_paths_and_the_old_plugin_paths_keep_working():
    import indexer
    from indexer.engine.llama_embedding import LlamaEmbedding as Engine
    from indexer.llama_embedding import LlamaEmbedding
    from indexer.models import ensure_model
    from indexer.plugin_api import prepare_vector as helper
    from indexer.store_support import ancestor_dirs, canonical_id, prepare_vector

    assert LlamaEmbedding is Engine and prepare_vector is helper
    assert callable(ensure_model) and callable(indexer.open_collection) and callable(canonical_id)
    assert ancestor_dirs("/a/b/c.md") == ["/", "/a", "/a/b"]
    for name in indexer.__all__:
        assert getattr(indexer, name) is not None


def test_plugins_get_everything_through_the_plugin_api():
    import indexer.plugin_api as api

    assert set(api.__all__) == {n for m, n in LISTED if m == "indexer.plugin_api"}
    for name in api.__all__:
        assert getattr(api, name) is not None
