"""What a verdict or a figure is measured on: the CPU (model and flags), the kernel and the llama.cpp build.

Read without loading llama.cpp: :func:`build_id` hashes llama-cpp-python's version and the bytes of its native
libraries; :func:`machine_line` is the one line every benchmark prints beside its figures.
"""

from __future__ import annotations

import hashlib
import os
import platform
from importlib.util import find_spec
from pathlib import Path


def cpuinfo() -> tuple[str, str]:
    """(model name, sorted flags) of the first CPU in /proc/cpuinfo ('' where unreadable)."""
    model, flags = platform.processor() or platform.machine(), ""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return model, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and model in ("", platform.machine()):
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = " ".join(sorted(value.split()))
    return model, flags


def library_dir() -> Path | None:
    """The folder of llama-cpp-python's native libraries, found without loading them."""
    spec = find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "lib"


_build_ids: dict[tuple[str, int, int], str] = {}


def build_id() -> str:
    """A hash of llama-cpp-python's version and the bytes of its native libraries (memoised per file stat)."""
    lib = library_dir()
    digest = hashlib.sha256()
    try:
        from importlib.metadata import version

        digest.update(version("llama_cpp_python").encode())
    except Exception:  # noqa: BLE001 - metadata missing: the libraries alone decide
        pass
    if lib is not None and lib.is_dir():
        for path in sorted(lib.glob("*.so*")) + sorted(lib.glob("*.dylib")) + sorted(lib.glob("*.dll")):
            try:
                st = path.stat()
            except OSError:
                continue
            stat_key = (str(path), st.st_size, st.st_mtime_ns)
            if stat_key not in _build_ids:
                _build_ids[stat_key] = hashlib.sha256(path.read_bytes()).hexdigest()
            digest.update(path.name.encode() + _build_ids[stat_key].encode())
    return digest.hexdigest()[:16]


INTERESTING_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8",
                     "amx_bf16", "avx_vnni")


def machine_line() -> str:
    """One line naming the machine a figure was measured on: CPU model, its vector/matrix flags, cores, load
    and the llama.cpp build (every benchmark prints it beside its figures)."""
    model, flags = cpuinfo()
    have = [f for f in INTERESTING_FLAGS if f in flags.split()]
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    listed = " ".join(have) or "no AVX2/AVX-512"
    return (f"machine: {model} | {os.cpu_count()} CPUs | flags: {listed}"
            f" | kernel {platform.release()} | llama.cpp build {build_id()} | load {load}")
