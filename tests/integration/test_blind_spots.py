"""The model's blind spots said out loud (real model, real files, FAISS and embedded Qdrant): folders of
Chinese, Japanese and Korean notes indexed with the default English model make `index` and `status` say, once,
how much of the text the model barely reads and how to fix it; English notes leave them silent; and after a
reindex to a multilingual model (the XLM-RoBERTa / bge-m3 fixture, converted by our converter) the warning is gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import indexer
from indexer.cli.status_view import lines as status_lines
from indexer.collection import reindex
from tests.families import proof
from tests.integration.corpus import write_corpus

pytestmark = pytest.mark.slow

STORES = [{"store": "faiss"}, {"store": "qdrant"}]
# The CJK notes are sentences the tiny multilingual fixture's tokenizer was trained on (its reference texts): a
# real multilingual model reads any such text, the tiny one only what its 4,000-token vocabulary holds.
NOTES = {
    "zh": {"glacier.md": "冰川在数千年间塑造了山谷。\n", "again.md": "冰川在数千年间塑造了山谷。" * 2 + "\n"},
    "ja": {"tokyo.md": "東京は日本の首都です。こんにちは、世界！\n", "again.md": "東京は日本の首都です。\n"},
    "ko": {"glacier.md": "빙하는 계곡을 깎는다\n", "again.md": "빙하는 계곡을 깎는다 빙하는 계곡을 깎는다\n"},
    "en": {"budget.md": "# Approvals\n\nThe quarterly budget was approved by the finance director.\n",
           "glacier.md": "# Field notes\n\nGlaciers melt quickly in summer.\n"},
}  # fmt: skip


def _ids(opts: dict[str, str]) -> str:
    return "-".join(str(v) for v in opts.values())


def _warnings(rows: list[tuple[str, str]]) -> list[str]:
    return [text for key, text in rows if key == "warning"]


@pytest.mark.parametrize("store_opts", STORES, ids=_ids)
@pytest.mark.parametrize("lang", ["zh", "ja", "ko"])
def test_cjk_notes_with_the_english_model_are_said_once_and_gone_after_a_multilingual_reindex(
    tmp_path: Path, embed_model_path: Path, store_opts: dict[str, str], lang: str
) -> None:
    corpus = write_corpus(tmp_path / lang, NOTES[lang])
    name = f"blind-{lang}-{_ids(store_opts)}"
    with indexer.open_collection(name, **store_opts) as col:
        report = col.index([corpus])
        said = [n for n in report.notes if "barely reads" in n]
        assert len(said) == 1, report.notes
        assert "all-MiniLM-L6-v2" in said[0] and "indexer models build --from" in said[0]
        assert "100%" in said[0] or "9" in said[0].split("%")[0]  # the share, high
        status = col.status()
        assert status["model_reads"]["share"] >= 0.9 and status["model_reads"]["note"] == said[0]
        assert len(_warnings(status_lines(status))) == 1
        assert not [n for n in col.index([corpus]).notes if "barely reads" in n]  # said once
        assert len(_warnings(status_lines(col.status()))) == 1  # status still says it

        multilingual = proof.convert("xlm_roberta_embed", tmp_path / "models", name="tiny-bge-m3")
        reindex.run(col, str(multilingual))
        status = col.status()
        assert status["model_reads"]["note"] is None and status["model_reads"]["share"] < 0.05, status["model_reads"]
        assert _warnings(status_lines(status)) == []
        assert not [n for n in col.index([corpus]).notes if "barely reads" in n]


@pytest.mark.parametrize("store_opts", STORES, ids=_ids)
def test_english_notes_with_the_english_model_are_silent(
    tmp_path: Path, embed_model_path: Path, store_opts: dict[str, str]
) -> None:
    corpus = write_corpus(tmp_path / "en", NOTES["en"])
    with indexer.open_collection(f"blind-en-{_ids(store_opts)}", **store_opts) as col:
        assert not [n for n in col.index([corpus]).notes if "barely reads" in n]
        status = col.status()
        assert status["model_reads"]["share"] == 0 and status["model_reads"]["note"] is None
        assert _warnings(status_lines(status)) == []
