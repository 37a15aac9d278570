"""Inputs that make llama.cpp hit a GGML_ASSERT (which kills Python) must raise or work instead.

Each scenario runs in a child process so that an abort shows up as a non-zero exit code instead of taking the
test run down with it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import sys
from indexer.engine.llama_embedding import LlamaEmbedding, LLAMA_POOLING_TYPE_NONE, LLAMA_POOLING_TYPE_RANK
MODEL = sys.argv[1]

def expect(exc, fn, text):
    try:
        fn()
    except exc as e:
        assert text in str(e), str(e)
    else:
        raise AssertionError("no error raised")
"""

SCENARIOS = {
    "oversize_token_list": """
        e = LlamaEmbedding(MODEL, verbose=False)
        expect(ValueError, lambda: e.embed([[101] + [1000] * 700 + [102]], truncate=False), "exceed batch size of 512")
        assert len(e.embed([[101] + [1000] * 700 + [102]])[0]) == 384
    """,
    "oversize_text_small_ubatch": """
        e = LlamaEmbedding(MODEL, n_batch=512, n_ubatch=64, verbose=False)
        expect(ValueError, lambda: e.embed("word " * 300, truncate=False), "exceed batch size of 64")
        out, n = e.embed(["word " * 300] + ["a b c d e f g h i j"] * 40, return_count=True)
        assert len(out) == 41 and n == 64 + 40 * 12
    """,
    "packed_batch_never_exceeds_ubatch": """
        e = LlamaEmbedding(MODEL, n_batch=512, n_ubatch=64, n_seq_max=16, verbose=False)
        texts = ["token " * k for k in range(1, 60)] * 3
        assert len(e.embed(texts)) == len(texts)
        t = LlamaEmbedding(MODEL, n_batch=512, n_ubatch=64, pooling_type=LLAMA_POOLING_TYPE_NONE, verbose=False)
        assert [len(m) for m in t.embed(texts[:59])] == [k + 2 for k in range(1, 60)]
    """,
    "positions_beyond_training_context": """
        # n_ctx above the model's 512 learned positions: position 512 would trip GGML_ASSERT in get_rows
        e = LlamaEmbedding(MODEL, n_ctx=1024, n_batch=1024, n_ubatch=1024, pack_tokens=1024, verbose=False)
        assert e.max_tokens == 512 and e.batch_tokens == 1024
        out, n = e.embed(["word " * 800, "word " * 600, "short"], return_count=True)
        assert len(out) == 3 and n == 512 + 512 + 3
        expect(ValueError, lambda: e.embed([[101] * 600], truncate=False), "exceed batch size of 512")
    """,
    "token_ids_out_of_range": """
        e = LlamaEmbedding(MODEL, verbose=False)
        expect(ValueError, lambda: e.embed([[101, 10**6, 102]]), "out of range")
        expect(ValueError, lambda: e.embed([[101, -5, 102]]), "out of range")
        assert len(e.embed("still works")) == 384
    """,
    "n_seq_max_not_dividing_n_ubatch": """
        expect(ValueError, lambda: LlamaEmbedding(MODEL, n_seq_max=7, verbose=False), "must divide n_ubatch")
        expect(ValueError, lambda: LlamaEmbedding(MODEL, n_ubatch=32, n_seq_max=64, verbose=False), "must divide")
        expect(ValueError, lambda: LlamaEmbedding(MODEL, n_seq_max=300, verbose=False), "n_seq_max")
        e = LlamaEmbedding(MODEL, n_batch=300, verbose=False)  # 0.3.36 itself would abort here
        assert e.n_seq_max == 150 and len(e.embed(["x"] * 200)) == 200
    """,
    "unknown_pooling_type": """
        expect(ValueError, lambda: LlamaEmbedding(MODEL, pooling_type=9, verbose=False), "pooling_type")
    """,
    "long_rank_pairs": """
        r = LlamaEmbedding(MODEL, pooling_type=LLAMA_POOLING_TYPE_RANK, n_ubatch=128, n_batch=512, verbose=False)
        scores = r.rank("query " * 400, ["document " * 900, "short"])
        assert len(scores) == 2
        assert all(len(s) <= 128 for s in r.rank_sequences("query " * 400, ["document " * 900]))
    """,
    "use_after_close": """
        e = LlamaEmbedding(MODEL, verbose=False)
        e.close()
        expect(RuntimeError, lambda: e.embed("x"), "closed")
        expect(RuntimeError, lambda: e.create_embedding("x"), "closed")
        expect(RuntimeError, lambda: e.tokenize(b"x"), "closed")
        del e
    """,
}


def run_child(code: str, model: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, str(model)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_does_not_abort(name: str, embed_model_path: Path) -> None:
    code = PRELUDE + textwrap.dedent(SCENARIOS[name]) + f"\nprint('OK {name}')\n"
    proc = run_child(code, embed_model_path)
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert f"OK {name}" in proc.stdout


@pytest.mark.slow
def test_control_plain_llama_aborts_on_a_small_ubatch(embed_model_path: Path) -> None:
    """The danger is real: llama-cpp-python 0.3.36 kills the process with the same settings."""
    code = textwrap.dedent(
        """
        import sys, llama_cpp
        m = llama_cpp.Llama(model_path=sys.argv[1], embedding=True, n_batch=512, n_ubatch=64, verbose=False)
        m.embed(["word " * 100])
        print("survived")
        """
    )
    proc = run_child(code, embed_model_path)
    assert proc.returncode != 0
    assert "survived" not in proc.stdout.splitlines()
    assert "GGML_ASSERT" in proc.stderr + proc.stdout
