"""The child processes of native work that may kill a process: the probe's decodes (:mod:`indexer.models.native`)
and llama.cpp's quantizer (:mod:`indexer.models.quantize`).

``python -m indexer.models.native_child '{"models": {"q8_0": PATH, ...}, "texts": [...]}'`` probes;
``python -m indexer.models.native_child quantize '{"jobs": [{"src", "dst", "ftype", "pure", "imatrix"}]}'``
quantizes (one ``{"event": "done"|"error", "dst": ...}`` line per job).

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
from typing import Any

KILL_ENV = "INDEXER_NATIVE_PROBE_KILL"  # tests: "q8_0" (SIGILL at its decode), "q4_K=SIGKILL", "f16=hang", ...
ROUNDS = 3


def simulated(quant: str) -> str:
    """What a test asked this child to do at ``quant``'s decode ('' for nothing): a signal name or "hang"."""
    for part in os.environ.get(KILL_ENV, "").split(","):
        name, _, action = part.strip().partition("=")
        if name and name == quant:
            return action or "SIGILL"
    return ""


def _emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    import llama_cpp
    import numpy as np

    request = json.loads(argv[1])
    paths: dict[str, str] = request["models"]
    texts: list[str] = request["texts"]
    models: dict[str, llama_cpp.Llama] = {}
    for quant, path in paths.items():
        _emit(event="start", quant=quant)
        try:
            model = llama_cpp.Llama(path, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=1,
                                    n_threads_batch=1, verbose=False)
            action = simulated(quant)
            if action == "hang":
                time.sleep(3600)
            elif action:
                os.kill(os.getpid(), getattr(signal, action))
            vectors = np.asarray(model.embed(texts, normalize=True), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which excludes the type
            _emit(event="error", quant=quant, error=f"{type(exc).__name__}: {exc}"[:300])
            continue
        models[quant] = model
        _emit(event="ok", quant=quant, vectors=np.round(vectors, 6).tolist())
    best: dict[str, float] = {}
    timed = {q: m for q, m in models.items() if q != request.get("untimed") and request.get("time", True)}
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


def quantize(request: dict[str, Any]) -> int:
    """Each job: ``llama_model_quantize(src, dst)`` at ``ftype``; ``pure`` writes every matrix at that type;
    ``imatrix`` passes an importance matrix of ones (the probe's files of types llama.cpp will not write
    without one). ``dst`` is written beside itself and renamed, so a half-written file never stands."""
    import ctypes

    import gguf
    import llama_cpp

    llama_cpp.llama_backend_init()
    for job in request["jobs"]:
        dst = str(job["dst"])
        tmp = f"{dst}.{os.getpid()}.part"
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = int(job["ftype"])
        params.nthread = int(job.get("threads", 0))
        params.pure = bool(job.get("pure", False))
        keep: list[object] = []
        if job.get("imatrix"):
            entries = []
            for tensor in gguf.GGUFReader(str(job["src"])).tensors:
                if len(tensor.shape) >= 2 and int(tensor.shape[1]) > 1:
                    ones = (ctypes.c_float * int(tensor.shape[0]))(*([1.0] * int(tensor.shape[0])))
                    keep.append(ones)
                    entries.append((tensor.name.encode(), ones, int(tensor.shape[0])))
            table = (llama_cpp.llama_model_imatrix_data * (len(entries) + 1))()
            for i, (name, data, size) in enumerate(entries):
                table[i].name = name
                table[i].data = ctypes.cast(data, ctypes.POINTER(ctypes.c_float))
                table[i].size = size
            keep.append(table)
            params.imatrix = ctypes.cast(table, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))
        rc = llama_cpp.llama_model_quantize(str(job["src"]).encode(), tmp.encode(), ctypes.byref(params))
        if rc != 0 or not os.path.isfile(tmp):
            if os.path.exists(tmp):
                os.unlink(tmp)
            _emit(event="error", dst=dst, error=f"llama_model_quantize returned {rc} (see llama.cpp's log)")
            continue
        os.replace(tmp, dst)
        _emit(event="done", dst=dst)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "quantize":
        sys.exit(quantize(json.loads(sys.argv[2])))
    sys.exit(main(sys.argv))
