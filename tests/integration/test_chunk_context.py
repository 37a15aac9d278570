"""The chunk context (indexer.index.context): a new collection embeds each chunk with its heading path in front
and records it; one made with chunk_context "none" embeds the text alone; a collection keeps what it was made
with. Real model, real FAISS."""

from __future__ import annotations

import numpy as np
import pytest

import indexer
from indexer.index.context import META_CHUNK_CONTEXT

pytestmark = pytest.mark.slow

GUIDE = "# Garden guide\n\n## Watering\n\n" + "\n\n".join(
    f"Paragraph {i}: tomatoes want deep watering twice a week in dry weather, less when it rains; "
    "mulch keeps the soil moist between waterings and stops weeds." for i in range(12)
) + "\n"


def _inner_chunk(col: indexer.Collection) -> tuple[str, str, tuple[str, ...]]:
    """(id, text, heading) of a chunk inside the Watering section that does not open with its heading."""
    for h in col.store.search(col.name, _vec(col, "tomatoes deep watering mulch"), 50):
        if not str(h.payload["text"]).lstrip().startswith("#"):
            return h.id, str(h.payload["text"]), tuple(h.payload["heading"])
    raise AssertionError("no chunk inside the section")


def _vec(col: indexer.Collection, text: str) -> np.ndarray:
    return col.embedder.embed_batch([text], col.record.normalization)[0]


def _stored_is(col: indexer.Collection, pid: str, text: str) -> bool:
    top = col.store.search(col.name, _vec(col, text), 1)[0]
    return top.id == pid and top.score > 0.999


@pytest.mark.parametrize("setting", ["heading", "none"])
def test_the_context_is_embedded_recorded_and_kept(tmp_path, embed_model_path, setting):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(GUIDE, encoding="utf-8")
    with indexer.open_collection(f"ctx-{setting}", chunk_context=setting) as col:
        col.index([tmp_path / "docs"])
        assert (col.store.collection_meta(col.name) or {})[META_CHUNK_CONTEXT] == setting
        assert col.status()["chunk_context"] == setting
        pid, text, heading = _inner_chunk(col)
        assert heading == ("Garden guide", "Watering")
        with_context = f"Garden guide > Watering\n\n{text}"
        assert _stored_is(col, pid, with_context if setting == "heading" else text)
        assert not _stored_is(col, pid, text if setting == "heading" else with_context)
    other = "none" if setting == "heading" else "heading"
    with indexer.open_collection(f"ctx-{setting}", chunk_context=other) as col:  # kept, not switched
        assert col.status()["chunk_context"] == setting
        (tmp_path / "docs" / "guide.md").write_text(GUIDE.replace("Paragraph 3", "Section 3"), encoding="utf-8")
        col.index([tmp_path / "docs"])
        pid, text, _ = _inner_chunk(col)
        assert _stored_is(col, pid, f"Garden guide > Watering\n\n{text}" if setting == "heading" else text)
