"""llama.cpp's own quantizer (``llama_model_quantize``), always in a child process: k-quants and i-quants.

gguf-py writes only f32, f16, bf16, q4_0/1, q5_0/1 and q8_0; the types people download (``Q4_K_M``, ``Q6_K``,
``IQ4_XS``) come from llama.cpp's quantizer, which this module runs on a GGUF our converter wrote. It is native
code, so it runs in :mod:`indexer.models.native_child` (``quantize`` command): a crash costs the child, never the
caller. Two uses:

* :func:`quantize_file` for ``indexer models build --quant q4_K_M`` (a file type: llama.cpp's own mix of tensor
  types, e.g. q4_K with q6_K for the value and down projections);
* the native probe, which writes a tiny model *purely* of one tensor type (``pure``) to prove that type, with an
  importance matrix of ones for the types llama.cpp will not write without one (iq1/iq2/iq3_xxs).

The type names are ggml's (``ggml_type_name``): ``q4_K``, ``iq4_xs``; :func:`canonical` reads any case.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from indexer.errors import ModelError

#: file types ``indexer models build --quant`` writes through the quantizer -> (llama_ftype, main tensor types).
#: On widths that are not multiples of 256 (MiniLM's 384) llama.cpp falls back per tensor (q4_K -> q5_0,
#: q5_K -> q5_1, q6_K -> q8_0, iq4_xs -> iq4_nl): the file's real mix is read back from it.
FILE_TYPES: dict[str, tuple[int, tuple[str, ...]]] = {
    "q4_0": (2, ("q4_0",)),
    "q4_1": (3, ("q4_1",)),
    "q5_0": (8, ("q5_0",)),
    "q5_1": (9, ("q5_1",)),
    "q2_K": (10, ("q2_K", "q3_K", "q4_K")),
    "q3_K_S": (11, ("q3_K",)),
    "q3_K_M": (12, ("q3_K", "q4_K", "q5_K")),
    "q3_K_L": (13, ("q3_K", "q5_K")),
    "q4_K_S": (14, ("q4_K", "q5_K")),
    "q4_K_M": (15, ("q4_K", "q6_K")),
    "q5_K_S": (16, ("q5_K",)),
    "q5_K_M": (17, ("q5_K", "q6_K")),
    "q6_K": (18, ("q6_K",)),
    "iq4_nl": (25, ("iq4_nl",)),
    "iq4_xs": (30, ("iq4_xs",)),
}

#: tensor type -> the llama_ftype whose pure form writes every matrix at that type (what the probe proves;
#: llama.cpp writes IQ2_S files mostly iq2_xs, so iq2_s comes from IQ2_M)
TYPE_FTYPES: dict[str, int] = {
    "q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9, "q2_K": 10, "q3_K": 11, "q4_K": 14, "q5_K": 16, "q6_K": 18,
    "iq2_xxs": 19, "iq2_xs": 20, "iq3_xxs": 23, "iq1_s": 24, "iq4_nl": 25, "iq3_s": 26, "iq2_s": 29,
    "iq4_xs": 30, "iq1_m": 31, "tq1_0": 36, "tq2_0": 37,
}
#: the tensor types llama.cpp refuses to write without an importance matrix
NEEDS_IMATRIX = frozenset({"iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m", "iq3_xxs"})

QUANTIZE_TIMEOUT = 1800.0  # seconds for a real model (bge-m3 at q4_K_M: about a minute on 2 cores)


def canonical(name: str) -> str:
    """ggml's spelling of a tensor or file type named in any case: ``Q4_K_M`` -> ``q4_K_M``, ``IQ4_XS`` ->
    ``iq4_xs``, ``BF16`` -> ``bf16``."""
    low = name.strip().lower()
    parts = low.split("_")
    if len(parts) >= 2 and parts[1] == "k" and parts[0].startswith("q"):
        parts[1:] = [p.upper() for p in parts[1:]]  # q4_K, q4_K_M, q3_K_L
    return "_".join(parts)


def quantize_file(src: Path, dst: Path, file_type: str, *, timeout: float = QUANTIZE_TIMEOUT) -> None:
    """Write ``dst`` from the f16/f32 GGUF ``src`` at ``file_type`` (a key of :data:`FILE_TYPES`) with
    llama.cpp's quantizer, in a child; :class:`ModelError` names the reason when it fails or dies."""
    ftype, _ = FILE_TYPES[file_type]
    run_quantizer([{"src": str(src), "dst": str(dst), "ftype": ftype, "pure": False, "imatrix": False}],
                  timeout=timeout, what=f"quantizing {src.name} to {file_type}")


def run_quantizer(jobs: list[dict[str, object]], *, timeout: float, what: str) -> list[dict[str, object]]:
    """Run the quantizer child on ``jobs``; its per-job events (``{"event": "done"|"error", "dst": ...}``).
    A child that dies or hangs raises :class:`ModelError` naming the signal or the time."""
    cmd = [sys.executable, "-m", "indexer.models.native_child", "quantize", json.dumps({"jobs": jobs})]
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ModelError(f"{what}: llama.cpp's quantizer did not finish in {timeout:.0f} s") from exc
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        raise ModelError(f"{what}: llama.cpp's quantizer was killed by {name}; nothing was written")
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [""])[-1][:300]
        raise ModelError(f"{what}: llama.cpp's quantizer exited with status {proc.returncode}: {tail}")
    failed = [e for e in events if e.get("event") == "error"]
    if failed and len(jobs) == 1:
        raise ModelError(f"{what}: {failed[0].get('error')}")
    return events
