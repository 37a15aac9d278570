"""The child process of the native probe (:mod:`indexer.models.native`): run as
``python -m indexer.models.native_child '{"models": {"q8_0": PATH, ...}, "texts": [...]}'``.

For each type in order it prints ``{"event": "start"}``, decodes the texts once, and prints ``{"event": "ok"}``
with the L2-normalized vectors (the parent compares them with f32's); a decode that kills the process leaves the
last ``start`` without its ``ok``, which tells the parent the culprit. Then the surviving types are timed in
three interleaved rounds on one thread each (the product's parallel contexts run one thread each) and each gets
``{"event": "time", "tokens_per_s": ...}`` (the best round). One JSON object per line on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

KILL_ENV = "INDEXER_NATIVE_PROBE_KILL"  # tests: a type whose decode this child turns into a SIGILL
ROUNDS = 3


def _emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    import llama_cpp
    import numpy as np

    request = json.loads(argv[1])
    paths: dict[str, str] = request["models"]
    texts: list[str] = request["texts"]
    kill = os.environ.get(KILL_ENV, "")
    models: dict[str, llama_cpp.Llama] = {}
    for quant, path in paths.items():
        _emit(event="start", quant=quant)
        try:
            model = llama_cpp.Llama(path, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=1,
                                    n_threads_batch=1, verbose=False)
            if quant == kill:
                os.kill(os.getpid(), signal.SIGILL)
            vectors = np.asarray(model.embed(texts, normalize=True), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which excludes the type
            _emit(event="error", quant=quant, error=f"{type(exc).__name__}: {exc}"[:300])
            continue
        models[quant] = model
        _emit(event="ok", quant=quant, vectors=np.round(vectors, 6).tolist())
    best: dict[str, float] = {}
    timed = {q: m for q, m in models.items() if q != request.get("untimed")}
    for _ in range(ROUNDS):
        for quant, model in timed.items():
            start = time.perf_counter()
            model.embed(texts)
            elapsed = time.perf_counter() - start
            best[quant] = min(best.get(quant, elapsed), elapsed)
    for quant, model in timed.items():
        tokens = sum(len(model.tokenize(t.encode())) for t in texts)
        _emit(event="time", quant=quant, tokens_per_s=round(tokens / best[quant], 1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
