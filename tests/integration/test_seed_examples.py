"""The user's reference document (the seed, ``LlamaEmbedding.md``), held as tests.

* Every name the seed imports or names from its module (``llama_cpp.llama_embedding`` there,
  ``indexer.llama_embedding`` here) imports from ours with the seed's value, is in the module's ``__all__``
  and is listed in docs/api.md. Removing one fails ``test_every_seed_name_is_in_our_module``.
* Every code example of the seed ("Example Code" 1, its "Advanced Output Formats", 2 and 3) runs as written
  but for the import path and the model paths (our fixtures: the default embedding model, and the committed
  test reranker for the rank example), and what the document says each returns is checked on the result.
* ``embed_multimodal`` (documented, no example) runs as the seed describes it on the tiny Qwen3-VL embedding
  model and its projector, both converted by our converter (tests/vision.py).

The examples are copied verbatim below: the tests may not read the shared folder beside the repository
(a fresh clone has none).
"""

from __future__ import annotations

import ast
import builtins
import re
import struct
import types
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import indexer.llama_embedding as facade

ROOT = Path(__file__).resolve().parents[2]
OUR_MODULE = "indexer.llama_embedding"
SEED_MODULE = "llama_cpp.llama_embedding"
SEED_EMBED_MODEL = "path/to/bge-m3.gguf"
SEED_RERANK_MODEL = "path/to/qwen3-reranker-0.6b-q8_0.gguf"
N_EMBD = 384  # all-MiniLM-L6-v2, the default embedding model

# The seed's "Example Code", verbatim but for trailing spaces (LlamaEmbedding.md, section "Example Code").
SEED_EXAMPLES: dict[str, str] = {
    "1-text-embeddings": '''\
from llama_cpp.llama_embedding import LlamaEmbedding, LLAMA_POOLING_TYPE_UNSPECIFIED

# Initialize the model (automatically sets embeddings=True)
llm = LlamaEmbedding(
    model_path="path/to/bge-m3.gguf",
    n_gpu_layers=-1,
    pooling_type=LLAMA_POOLING_TYPE_UNSPECIFIED,
    n_seq_max=128,
)

# 1. Simple usage (OpenAI-compatible format)
response = llm.create_embedding("Hello, world!")
print(response['data'][0]['embedding'])

# 2. Batch processing (High Performance)
# Native inference is batched; the returned vectors still occupy host memory.
documents = ["Hello, world!", "Goodbye, world!", "Llama is cute."] * 100
embeddings = llm.embed(documents) # Returns a list of lists (vectors)

print(f"Generated {len(embeddings)} vectors.")
''',
    "1-advanced-output-formats": '''\
from llama_cpp.llama_embedding import LlamaEmbedding, LLAMA_POOLING_TYPE_UNSPECIFIED

# Initialize the model (automatically sets embeddings=True)
llm = LlamaEmbedding(model_path="path/to/bge-m3.gguf", n_gpu_layers=-1, pooling_type=LLAMA_POOLING_TYPE_UNSPECIFIED)

# Returns a list containing one sequence vector
vector = llm.create_embedding("Text", output_format="array")

# Returns a similarity matrix (A @ A.T) in the response
# Note: Requires numpy installed
response = llm.create_embedding(
    ["apple", "fruit", "car"],
    output_format="json+"
)
print(response["cosineSimilarity"])
''',
    "2-reranking": '''\
import llama_cpp
from llama_cpp.llama_embedding import LlamaEmbedding

# Initialize a Reranking model
ranker = LlamaEmbedding(
    model_path="path/to/qwen3-reranker-0.6b-q8_0.gguf",
    pooling_type=llama_cpp.LLAMA_POOLING_TYPE_RANK,  # Crucial for Rerankers!
    n_gpu_layers=-1,
    n_ctx=0
)

query = "What causes Rain?"
docs = [
    "Clouds are made of water droplets...", # Relevant
    "To bake a cake you need flour...",     # Irrelevant
    "Rain is liquid water in the form of droplets..." # Highly Relevant
]

# Calculate relevance scores
# Logic: Constructs inputs like "[BOS] query [SEP] doc [EOS]" automatically
scores = ranker.rank(query, docs)

# Result: List of floats (higher means more relevant)
print(scores)
# e.g., [0.0011407170677557588, 5.614783731289208e-05, 0.7173627614974976] -> The 3rd doc is the best match
''',
    "3-normalization": '''\
from llama_cpp.llama_embedding import (
  LLAMA_POOLING_TYPE_NONE,
  NORM_MODE_MAX_INT16,
  NORM_MODE_TAXICAB,
  NORM_MODE_EUCLIDEAN
)

# Initialize the model (automatically sets embeddings=True)
llm = LlamaEmbedding(model_path="path/to/bge-m3.gguf", n_gpu_layers=-1, pooling_type=LLAMA_POOLING_TYPE_NONE)

# Taxicab (L1)
vec_l1 = llm.embed("text", normalize=NORM_MODE_TAXICAB)

# Default is Euclidean (L2) - Standard for vector databases
vec_l2 = llm.embed("text", normalize=NORM_MODE_EUCLIDEAN)

# Max Absolute Int16 - Useful for quantization/compression
vec_int16 = llm.embed("text", normalize=NORM_MODE_MAX_INT16)

# Raw Output (No Normalization) - Get the raw floating point values from the model
embeddings_raw = llm.embed(["search query", "document text"], normalize=NORM_MODE_NONE)
''',
}

# Every name the seed gives its module, with the value the seed states: the normalization modes (its
# "Normalization Modes" list and table), the pooling types its text names (UNSPECIFIED (-1), RANK (4),
# NONE (0)), and MEAN/CLS/LAST, which the seed's module re-exports from llama_cpp with them
# (spec llama-embedding.md 1.1).
SEED_VALUES: dict[str, int] = {
    "NORM_MODE_NONE": -1,
    "NORM_MODE_MAX_INT16": 0,
    "NORM_MODE_TAXICAB": 1,
    "NORM_MODE_EUCLIDEAN": 2,
    "NORM_MODE_PNORM": 6,
    "LLAMA_POOLING_TYPE_UNSPECIFIED": -1,
    "LLAMA_POOLING_TYPE_NONE": 0,
    "LLAMA_POOLING_TYPE_MEAN": 1,
    "LLAMA_POOLING_TYPE_CLS": 2,
    "LLAMA_POOLING_TYPE_LAST": 3,
    "LLAMA_POOLING_TYPE_RANK": 4,
}
SEED_CLASSES = ("LlamaEmbedding",)


def seed_imports(code: str) -> list[str]:
    """The names an example imports from the seed's module (``from llama_cpp.llama_embedding import ...``)."""
    return [
        alias.name
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.ImportFrom) and node.module == SEED_MODULE
        for alias in node.names
    ]


def unimported(code: str) -> set[str]:
    """Names an example reads but neither imports nor assigns (nor are builtins)."""
    tree = ast.parse(code)
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    bound = {n.id for n in names if isinstance(n.ctx, ast.Store)}
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    bound |= {(a.asname or a.name).split(".")[0] for n in imports for a in n.names}
    read = {n.id for n in names if isinstance(n.ctx, ast.Load)}
    return read - bound - set(dir(builtins))


def seed_names() -> list[str]:
    """Every name the seed imports or names from its module: its examples' imports, its constants, its class."""
    names = dict.fromkeys([*SEED_CLASSES, *SEED_VALUES])
    for code in SEED_EXAMPLES.values():
        names.update(dict.fromkeys(seed_imports(code)))
        names.update(dict.fromkeys(sorted(unimported(code))))
    return list(names)


def missing_seed_names(module: types.ModuleType) -> list[str]:
    """The seed's names ``module`` lacks or holds with another value than the seed's."""
    out = [n for n in seed_names() if not hasattr(module, n)]
    out += [n for n, v in SEED_VALUES.items() if hasattr(module, n) and getattr(module, n) != v]
    return out


def _api_md_names() -> set[str]:
    for line in (ROOT / "docs" / "api.md").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{OUR_MODULE}` |"):
            return set(re.findall(r"`(\w+)`", line.split("|")[2]))
    raise AssertionError(f"docs/api.md has no row for {OUR_MODULE}")


# ---------------------------------------------------------------------------------------------------------
# The names
# ---------------------------------------------------------------------------------------------------------


def test_the_seed_names_are_all_known() -> None:
    # every name an example imports has its seed value above (or is the class), so none escapes the checks
    imported = {n for code in SEED_EXAMPLES.values() for n in seed_imports(code)}
    assert imported == {"LlamaEmbedding", "LLAMA_POOLING_TYPE_UNSPECIFIED", "LLAMA_POOLING_TYPE_NONE",
                        "NORM_MODE_MAX_INT16", "NORM_MODE_TAXICAB", "NORM_MODE_EUCLIDEAN"}
    assert imported <= {*SEED_CLASSES, *SEED_VALUES}
    # names an example uses without importing them (the seed's example 3 forgets two)
    used = {key: unimported(code) for key, code in SEED_EXAMPLES.items()}
    assert used == {"1-text-embeddings": set(), "1-advanced-output-formats": set(), "2-reranking": set(),
                    "3-normalization": {"LlamaEmbedding", "NORM_MODE_NONE"}}


@pytest.mark.parametrize("name", seed_names())
def test_every_seed_name_is_in_our_module(name: str) -> None:
    assert hasattr(facade, name), f"the seed imports {name} from its module; {OUR_MODULE} lacks it"
    assert name in facade.__all__
    if name in SEED_VALUES:
        value = getattr(facade, name)
        assert type(value) is int, f"{name} is {value!r}"
        assert value == SEED_VALUES[name], f"{name} is {value!r}, the seed says {SEED_VALUES[name]}"


def test_every_seed_name_is_listed_in_docs_api_md() -> None:
    assert set(seed_names()) <= _api_md_names()


def test_a_missing_seed_name_is_caught() -> None:
    assert missing_seed_names(facade) == []
    for gone in seed_names():
        clone = types.ModuleType("clone")
        clone.__dict__.update({k: v for k, v in vars(facade).items() if k != gone})
        assert missing_seed_names(clone) == [gone]
    changed = types.ModuleType("changed")
    changed.__dict__.update(vars(facade), NORM_MODE_PNORM=3)
    assert missing_seed_names(changed) == ["NORM_MODE_PNORM"]


def test_the_pooling_types_are_llama_cpps() -> None:
    import llama_cpp

    for name in SEED_VALUES:
        if name.startswith("LLAMA_POOLING_TYPE_"):
            assert getattr(facade, name) == getattr(llama_cpp, name)
    from indexer.engine.llama_embedding import LlamaEmbedding

    assert facade.LlamaEmbedding is LlamaEmbedding


# ---------------------------------------------------------------------------------------------------------
# The examples, run
# ---------------------------------------------------------------------------------------------------------


def ours(code: str, models: dict[str, Path]) -> str:
    """The example with our import path and our model files."""
    assert SEED_MODULE in code
    code = code.replace(f"from {SEED_MODULE} import", f"from {OUR_MODULE} import")
    for seed_path, path in models.items():
        code = code.replace(f'"{seed_path}"', repr(str(path)))
    assert "path/to/" not in code and SEED_MODULE not in code
    return code


def run_example(key: str, models: dict[str, Path]) -> dict[str, Any]:
    """Run an example. Example 3 uses ``LlamaEmbedding`` and ``NORM_MODE_NONE`` without importing them (the
    page's reader has them from earlier examples, or adds the import): they come from our module, as every
    such name must."""
    code = SEED_EXAMPLES[key]
    ns: dict[str, Any] = {"__name__": f"seed_example_{key}"}
    ns.update({name: getattr(facade, name) for name in unimported(code)})
    exec(compile(ours(code, models), f"<seed example {key}>", "exec"), ns)
    return ns


@pytest.fixture
def close_models() -> Iterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for llm in opened:
        llm.close()


def _unit(v: Any) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    assert a.ndim == 1 and a.size == N_EMBD
    return a


def test_example_1_text_embeddings(embed_model_path: Path, close_models: list[Any], capsys) -> None:
    ns = run_example("1-text-embeddings", {SEED_EMBED_MODEL: embed_model_path})
    llm = ns["llm"]
    close_models.append(llm)
    assert isinstance(llm, facade.LlamaEmbedding)
    assert llm.context_params.embeddings is True  # "automatically sets embeddings=True"
    assert llm.n_seq_max == 128

    # 1. the OpenAI-compatible response of one string, its vector L2-normalised (the default)
    response = ns["response"]
    assert response["object"] == "list" and response["model"] == str(embed_model_path)
    assert len(response["data"]) == 1
    entry = response["data"][0]
    assert entry["object"] == "embedding" and entry["index"] == 0
    vector = entry["embedding"]
    assert isinstance(vector, list) and all(type(x) is float for x in vector)
    assert np.linalg.norm(_unit(vector)) == pytest.approx(1.0, rel=1e-5)
    n_tokens = len(llm.tokenize(b"Hello, world!"))
    assert response["usage"] == {"prompt_tokens": n_tokens, "total_tokens": n_tokens}

    # 2. a batch: a list of lists (vectors), one per document, in input order
    documents, embeddings = ns["documents"], ns["embeddings"]
    assert isinstance(embeddings, list) and len(embeddings) == len(documents) == 300
    matrix = np.array([_unit(e) for e in embeddings])
    assert all(isinstance(e, list) and type(e[0]) is float for e in embeddings)
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-5)
    # q8_0 (the probe's choice on AMX CPUs) quantizes activations and takes other kernels for other batch shapes
    tol = 5e-3 if embed_model_path.name.endswith("-q8_0.gguf") else 2e-3
    for i in range(3):  # the same text gives the same vector wherever it sits in the batch
        np.testing.assert_allclose(matrix[i::3], np.broadcast_to(matrix[i], (100, N_EMBD)), atol=tol)
    one_by_one = np.array([_unit(llm.embed(d)) for d in documents[:3]])
    np.testing.assert_allclose(matrix[:3], one_by_one, atol=tol)
    np.testing.assert_allclose(matrix[0], vector, atol=tol)
    assert np.dot(matrix[0], matrix[1]) < 0.999  # different texts, different vectors

    printed = capsys.readouterr().out.splitlines()
    assert "Generated 300 vectors." in printed
    assert str(vector) in printed


def test_example_1_advanced_output_formats(embed_model_path: Path, close_models: list[Any], capsys) -> None:
    ns = run_example("1-advanced-output-formats", {SEED_EMBED_MODEL: embed_model_path})
    llm = ns["llm"]
    close_models.append(llm)

    # "array": a list containing one sequence vector
    vector = ns["vector"]
    assert isinstance(vector, list) and len(vector) == 1
    assert np.linalg.norm(_unit(vector[0])) == pytest.approx(1.0, rel=1e-5)
    np.testing.assert_allclose(vector[0], llm.embed("Text"), atol=2e-3)

    # "json+": the response plus the similarity matrix A @ A.T of its (L2-normalised) vectors
    response = ns["response"]
    assert [d["index"] for d in response["data"]] == [0, 1, 2]
    a = np.array([_unit(d["embedding"]) for d in response["data"]])
    sim = response["cosineSimilarity"]
    assert isinstance(sim, list) and len(sim) == 3 and all(isinstance(r, list) and len(r) == 3 for r in sim)
    assert all(type(x) is float for r in sim for x in r)
    np.testing.assert_allclose(np.array(sim), a @ a.T, atol=1e-5)
    np.testing.assert_allclose(np.diag(np.array(sim)), 1.0, atol=1e-5)
    assert np.all(np.abs(np.array(sim)[~np.eye(3, dtype=bool)]) < 0.999)  # three different words
    assert {k for k in response if k != "cosineSimilarity"} == {"object", "data", "model", "usage"}
    assert str(sim) in capsys.readouterr().out.splitlines()


def test_example_2_reranking(reranker_model_path: Path, close_models: list[Any], capsys) -> None:
    ns = run_example("2-reranking", {SEED_RERANK_MODEL: reranker_model_path})
    ranker = ns["ranker"]
    close_models.append(ranker)
    assert ranker.pooling == facade.LLAMA_POOLING_TYPE_RANK

    scores = ns["scores"]
    # a list of floats, one per document; higher means more relevant: the 3rd doc is the best match, the cake
    # the worst
    assert isinstance(scores, list) and len(scores) == len(ns["docs"]) == 3
    assert all(type(s) is float and np.isfinite(s) for s in scores)
    assert int(np.argmax(scores)) == 2
    assert int(np.argmin(scores)) == 1
    # the scores are the model's, document by document (raw logits: no softmax, no normalization)
    for doc, score in zip(ns["docs"], scores, strict=True):
        assert ranker.rank(ns["query"], [doc]) == [pytest.approx(score, abs=0.1)]
    assert str(scores) in capsys.readouterr().out.splitlines()


def test_example_3_normalization(embed_model_path: Path, close_models: list[Any]) -> None:
    ns = run_example("3-normalization", {SEED_EMBED_MODEL: embed_model_path})
    llm = ns["llm"]
    close_models.append(llm)
    assert llm.pooling == facade.LLAMA_POOLING_TYPE_NONE

    # NONE pooling: one token-vector matrix per input, each row normalised on its own
    raw = llm.embed("text", normalize=facade.NORM_MODE_NONE)
    n_tokens = len(llm.tokenize(b"text"))
    x = np.array(raw, dtype=np.float64)
    assert x.shape == (n_tokens, N_EMBD)
    matrices = {k: np.array(ns[k], dtype=np.float64) for k in ("vec_l1", "vec_l2", "vec_int16")}
    for name, m in matrices.items():
        assert isinstance(ns[name], list) and all(isinstance(r, list) for r in ns[name])
        assert m.shape == x.shape, name
    np.testing.assert_allclose(matrices["vec_l1"], x / np.abs(x).sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(matrices["vec_l2"], x / np.linalg.norm(x, axis=1, keepdims=True), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(matrices["vec_int16"], 32760 * x / np.abs(x).max(axis=1, keepdims=True),
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.abs(matrices["vec_l1"]).sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(matrices["vec_l2"], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.abs(matrices["vec_int16"]).max(axis=1), 32760.0, rtol=1e-6)
    # "Default is Euclidean (L2)"
    np.testing.assert_allclose(np.array(llm.embed("text")), matrices["vec_l2"], rtol=1e-5, atol=1e-7)
    # NORM_MODE_PNORM (6), or any integer above 2, is that p-norm
    p6 = np.array(llm.embed("text", normalize=facade.NORM_MODE_PNORM), dtype=np.float64)
    np.testing.assert_allclose(p6, x / (np.abs(x) ** 6).sum(axis=1, keepdims=True) ** (1 / 6), rtol=1e-4, atol=1e-7)

    # raw output of a batch: one unnormalised matrix per input, in order
    embeddings_raw = ns["embeddings_raw"]
    assert isinstance(embeddings_raw, list) and len(embeddings_raw) == 2
    for text, m in zip(["search query", "document text"], embeddings_raw, strict=True):
        a = np.array(m, dtype=np.float64)
        assert a.shape == (len(llm.tokenize(text.encode())), N_EMBD)
        assert not np.allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-3)
        np.testing.assert_allclose(a, np.array(llm.embed(text, normalize=facade.NORM_MODE_NONE)), rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------------------------------------
# embed_multimodal: documented by the seed (no example there), needs a projector
# ---------------------------------------------------------------------------------------------------------


def _png_1x1() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # one red pixel (filter byte, then RGB)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def test_embed_multimodal_as_the_seed_documents(tmp_path: Path, close_models: list[Any]) -> None:
    from tests import vision

    model_path, mmproj_path = vision.build(tmp_path, "f16")
    llm = facade.LlamaEmbedding(str(model_path), mmproj_path=str(mmproj_path), verbose=False)
    close_models.append(llm)
    image = _png_1x1()
    vector, n_tokens = llm.embed_multimodal(parts=["A photo of", image], return_count=True)
    assert isinstance(vector, list) and all(type(x) is float for x in vector)
    assert len(vector) == llm.n_embd_out
    assert np.linalg.norm(vector) == pytest.approx(1.0, rel=1e-5)
    assert n_tokens > len(llm.tokenize(b"A photo of"))  # media tokens count
    np.testing.assert_allclose(llm.embed_multimodal(parts=["A photo of", image]), vector, atol=1e-5)
