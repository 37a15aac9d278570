"""Build and install llama-cpp-python with the fix for ggml's AMX tile configuration and our speed patches (the
install step of ``make setup``, through tools/build_llama_cpp.py; pip users: ``python -m indexer.engine.llama_build``
in the venv that has llama-indexer). Standard library only: it runs before the package's dependencies exist.

llama-cpp-python 0.3.36 compiles llama.cpp natively (``-march=native``). On an Intel CPU with AMX that brings
in ggml's AMX int8 kernels, whose tile configuration is built on the stack; GCC 12 drops its row and column
stores, so ``ldtilecfg`` loads an empty configuration and the first q8_0 decode dies with SIGILL
(llama.cpp pull request 26954). This script downloads the sdist from the package index, moves the
configuration to ``.rodata`` and asks for the tile-data permission in each thread (the fix of that pull request,
written here as a patch of one function), builds a wheel, caches it by the sdist's hash, the patch, the compiler
and the CPU (a native build belongs to its CPU), and installs it. ``--check`` verifies the built library: the
fixed configuration is in ``libggml-cpu`` wherever the AMX kernels are compiled in.

On CPUs without AMX the patched function is not compiled at all.

Speed patches (``indexer/engine/llama_cpp_patches/*.patch``, unified diffs against the vendored llama.cpp,
applied in name order): what a text encoder pays for and a generative model never noticed (issue "Engine speed";
each measured alone with ``bench/engine_builds.py``, its vectors held to f32):

* ``01-vec-simd``: GELU on SIMD registers instead of a scalar fp16 table lookup per element; a vector maximum
  (flash attention calls it for every row of every tile);
* ``02-tinyblas-hsum4``: the bf16/f32 ``tinyBLAS`` kernel reduced its 24 accumulators one by one through a stack
  copy (with a 1.5 KiB ``memset`` per block): now four at a time, in registers, one store per column;
* ``03-flash-attn-tiles``: flash attention's mask rows converted and tested as vectors, and its V product at head
  size 32 on an eight-row, two-vector kernel.

``--no-speed-patches`` builds with the AMX fix only (for comparisons; the wheel is cached apart).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VERSION = "0.3.36"
PATCH_VERSION = 2
PATCHES = Path(__file__).resolve().parent / "llama_cpp_patches"  # shipped in the wheel (package data)
MMQ = "vendor/llama.cpp/ggml/src/ggml-cpu/amx/mmq.cpp"
OLD_START = "inline void ggml_tile_config_init(void) {"
OLD_END = "    done = true;\n}\n"
# palette 1; colsb (uint16 LE) 64,64,32,32,64,64,64,64; rows 8,8,16,16,16,16,16,16: ggml's own 16-16-32 layout
CONFIG_BYTES = bytes([1] + [0] * 15 + [64, 0, 64, 0, 32, 0, 32, 0, 64, 0, 64, 0, 64, 0, 64, 0] + [0] * 16
                     + [8, 8, 16, 16, 16, 16, 16, 16] + [0] * 8)
NEW_FUNCTION = """// indexer's patch (llama.cpp PR 26954): the tile configuration lives in .rodata. Built on the
// stack, GCC drops its stores and ldtilecfg loads an empty configuration: SIGILL at the next tile instruction.
alignas(64) static const uint8_t ggml_amx_tile_config[64] = {@CONFIG@};

inline void ggml_tile_config_init(void) {
    static thread_local bool done = false;

    if (done) {
        return;
    }
#if defined(__linux__)
    syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */);
#endif
    _tile_loadconfig(ggml_amx_tile_config);
    done = true;
}
""".replace("@CONFIG@", ", ".join(str(b) for b in CONFIG_BYTES))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "indexer-build"


def speed_patches() -> list[Path]:
    return sorted(PATCHES.glob("*.patch"))


def patch_source(root: Path, speed: bool = True) -> None:
    """Replace ``ggml_tile_config_init`` in the unpacked sdist at ``root``, then apply the speed patches."""
    path = root / MMQ
    text = path.read_text()
    start = text.index(OLD_START)
    end = text.index(OLD_END, start) + len(OLD_END)
    path.write_text(text[:start] + NEW_FUNCTION + text[end:])
    if speed:
        for patch in speed_patches():
            apply_patch(root / "vendor" / "llama.cpp", patch)


def apply_patch(tree: Path, patch: Path) -> None:
    """Apply one unified diff to ``tree`` with ``git apply`` (or ``patch``); a patch that does not apply stops the
    build with its name: the vendored llama.cpp changed under it."""
    if shutil.which("git"):
        cmd = ["git", "apply", "--whitespace=nowarn", "-p1", str(patch)]
    elif shutil.which("patch"):
        cmd = ["patch", "-p1", "--forward", "--batch", "-i", str(patch)]
    else:
        raise SystemExit("applying the llama.cpp speed patches needs git or patch: install one (apt install git)")
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{patch.name} does not apply to llama-cpp-python {VERSION}'s llama.cpp: "
                         f"{(done.stderr or done.stdout).strip()[-600:]}")
    print(f"applied {patch.name}", flush=True)


def _cpu_key() -> str:
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        info = platform.processor()
    model = next((line for line in info.splitlines() if line.startswith("model name")), "")
    flags = next((line for line in info.splitlines() if line.startswith("flags")), "")
    return hashlib.sha256((model + flags).encode()).hexdigest()[:12]


def _compiler() -> str:
    for cc in (os.environ.get("CC", ""), "cc", "gcc"):
        if cc and shutil.which(cc):
            out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout
            return out.splitlines()[0] if out else cc
    return "none"


def download_sdist(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"llama_cpp_python-{VERSION}.tar.gz"))
    if found:
        return found[0]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={VERSION}", "-d", str(dest)], check=True)
    return next(dest.glob(f"llama_cpp_python-{VERSION}.tar.gz"))


def wheel_key(sdist: Path, speed: bool = True) -> str:
    """What the wheel depends on: the sdist, the patches, the compiler, the CPU, CMAKE_ARGS and Python."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()[:12]
    patches = hashlib.sha256(b"".join(p.read_bytes() for p in speed_patches())).hexdigest()[:12] if speed else "none"
    parts = [digest, str(PATCH_VERSION), CONFIG_BYTES.hex(), patches, _compiler(), _cpu_key(),
             os.environ.get("CMAKE_ARGS", ""), sys.version]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def build(force: bool = False, speed: bool = True) -> Path:
    """The patched wheel for this machine, built once and cached."""
    cache = cache_dir()
    sdist = download_sdist(cache / "sdist")
    wheels = cache / f"wheels-{wheel_key(sdist, speed)}"
    what = "AMX fix and speed patches" if speed else "AMX fix only"
    built = sorted(wheels.glob("llama_cpp_python-*.whl"))
    if built and not force:
        print(f"llama-cpp-python {VERSION} ({what}): cached wheel {built[0]}", flush=True)
        return built[0]
    with tempfile.TemporaryDirectory(prefix="llama-cpp-build-") as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        root = Path(tmp) / f"llama_cpp_python-{VERSION}"
        patch_source(root, speed)
        print(f"building llama-cpp-python {VERSION} with the {what} (about 13 minutes on 2 cores) ...", flush=True)
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(root)],
                       check=True)
    return sorted(wheels.glob("llama_cpp_python-*.whl"))[0]


def check() -> str:
    """Verify the installed library: where ggml's AMX kernels are compiled in (``ldtilecfg`` present), the fixed
    configuration must be in ``libggml-cpu``. Returns what was found; raises SystemExit on a stock AMX build."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise SystemExit("llama_cpp is not installed")
    libs = sorted((Path(spec.origin).parent / "lib").glob("libggml-cpu*"))
    if not libs:
        return "no libggml-cpu found (a build without a separate CPU library): nothing to check"
    data = b"".join(p.read_bytes() for p in libs)
    ldtilecfg = b"\xc4\xe2\x78\x49"  # VEX.128.NP.0F38.W0 49 /0: ldtilecfg m512
    # patch 01 turns ggml_vec_gelu_f32 into an exported function on AVX2 / AVX-512 builds (a static inline before)
    speed = ("speed patches compiled in" if b"ggml_vec_gelu_f32" in data
             else "speed patches not compiled in (a stock build, or a CPU without AVX2)")
    if ldtilecfg not in data:
        return f"AMX kernels not compiled in (this CPU has no AMX, or the build left them out): fine; {speed}"
    if CONFIG_BYTES not in data:
        raise SystemExit("the installed llama-cpp-python has ggml's AMX kernels without the tile-configuration "
                         "fix: q8_0 models die with SIGILL on AMX CPUs; run `make llama-cpp` (or "
                         "`python -m indexer.engine.llama_build --force`)")
    return f"AMX kernels compiled in, with the fixed tile configuration; {speed}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when a cached wheel exists")
    parser.add_argument("--check", action="store_true", help="only verify the installed library")
    parser.add_argument("--wheel-only", action="store_true", help="build (or find) the wheel, do not install")
    parser.add_argument("--no-speed-patches", action="store_true", help="the AMX fix only (for comparisons)")
    args = parser.parse_args()
    if not args.check:
        wheel = build(force=args.force, speed=not args.no_speed_patches)
        if args.wheel_only:
            print(wheel)
            return 0
        subprocess.run([sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps", str(wheel)],
                       check=True)
    print(f"llama-cpp-python check: {check()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
