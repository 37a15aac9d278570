"""Which weight types this machine's llama.cpp runs, and which is fastest: proven in a child process.

A native path of llama.cpp can kill the whole process (llama-cpp-python 0.3.36 built natively on an Intel Xeon
with AMX dies with SIGILL on its first q8_0 decode: the AMX int8 kernel loads a tile configuration the compiler
left empty). No CPU flag says so in advance, so every weight type worth using is *proven* once per machine and
build before its first real use:

* the probe writes a tiny BERT model of MiniLM's widths itself (random weights, numpy + our converter: no user
  file, no download) at f32, f16, bf16 and q8_0;
* a child process (:mod:`indexer.models.native_child`) decodes each type once, then times the survivors
  interleaved; a type whose decode kills the child is excluded, with the signal as the reason, and the child is
  started again for the types not yet tried;
* the verdict is cached in ``<models dir>/.native/`` under a key made of the CPU model and flags, the kernel
  release, the llama.cpp build (a hash of its native libraries) and :data:`PROBE_VERSION`; a change of any of
  them probes again. Two first runs at once share one probe (a file lock).

:func:`probe` returns the verdict; :func:`check_model_file` refuses, before any native call, a GGUF file whose
weight types did not survive; :func:`chosen_quant` is the measured default weight type (the fastest type that
passes the quality gate), replacing the old "bf16 where the CPU has avx512_bf16" flag rule.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from indexer.core.location import models_dir
from indexer.core.locks import lock_for
from indexer.errors import ModelError

logger = logging.getLogger(__name__)

PROBE_VERSION = 1
#: the weight types the probe proves and times, riskiest first (a death then costs least); f32 is the reference
PROBE_QUANTS = ("q8_0", "bf16", "f16", "f32")
#: the types a catalogue model may be built with by default, in order of preference on a tie
CANDIDATE_QUANTS = ("f16", "bf16", "q8_0")
#: quality gate on the probe model: min cosine of a type's vectors to f32's (the tests hold the real models to
#: f16/bf16 >= 0.9999 and q8_0 >= 0.999)
MIN_COSINE = 0.999
#: types whose SciFact-train nDCG@10 with the default model is within 0.003 of f16 (docs/benchmarks.md)
SCIFACT_GATE_PASSED = frozenset({"f16", "bf16", "q8_0"})
#: a type must beat the next preferred one by this fraction to be chosen over it (timing noise of the probe)
MIN_GAIN = 0.05
CHILD_TIMEOUT = 60.0  # seconds: a child that hangs is killed and its current type excluded
PROBE_ENV = "INDEXER_NATIVE_PROBE"  # "off": trust every type (no child; for environments without fork/exec)
_GGML_TYPE_NAMES = {0: "f32", 1: "f16", 8: "q8_0", 30: "bf16"}

_lock = threading.Lock()
_memo: dict[str, Probe] = {}


@dataclass(frozen=True)
class TypeVerdict:
    """One weight type on this machine: whether its decode survived, how fast, how close to f32."""

    quant: str
    runs: bool
    reason: str = ""  # why it is excluded ("" when it runs)
    tokens_per_s: float | None = None
    min_cosine: float | None = None  # to the f32 vectors of the same inputs


@dataclass(frozen=True)
class Probe:
    """The verdict of one probe: every type tried, the type chosen as default, and what it was keyed by."""

    key: dict[str, str]
    verdicts: tuple[TypeVerdict, ...]
    chosen: str
    seconds: float
    created: float = field(default_factory=time.time)

    def verdict(self, quant: str) -> TypeVerdict | None:
        return next((v for v in self.verdicts if v.quant == quant), None)

    def runs(self, quant: str) -> bool:
        """Whether ``quant`` survived (a type the probe does not cover is trusted)."""
        verdict = self.verdict(quant)
        return verdict is None or verdict.runs

    @property
    def excluded(self) -> list[TypeVerdict]:
        return [v for v in self.verdicts if not v.runs]

    def summary(self) -> str:
        """One line: the chosen type, the speed of each type, what was excluded and why."""
        parts = []
        for v in self.verdicts:
            if v.quant == "f32":
                continue
            if v.runs:
                speed = f"{v.tokens_per_s:,.0f} tok/s" if v.tokens_per_s else "runs"
                parts.append(f"{v.quant} {speed}")
            else:
                parts.append(f"{v.quant} excluded ({v.reason})")
        return f"weight type {self.chosen} (measured: {'; '.join(parts)})"

    def to_json(self) -> dict[str, object]:
        return {"key": self.key, "verdicts": [asdict(v) for v in self.verdicts], "chosen": self.chosen,
                "seconds": self.seconds, "created": self.created}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Probe:
        verdicts = tuple(TypeVerdict(**v) for v in data["verdicts"])
        return cls(key=dict(data["key"]), verdicts=verdicts, chosen=str(data["chosen"]),
                   seconds=float(data["seconds"]), created=float(data.get("created", 0.0)))


# -- the key -------------------------------------------------------------------------------------------------


def _cpuinfo() -> tuple[str, str]:
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


def machine_key() -> dict[str, str]:
    """What a verdict depends on: CPU model and flags, kernel release, llama.cpp build, probe version."""
    from indexer.models.native_child import KILL_ENV

    model, flags = _cpuinfo()
    key = {
        "cpu": model,
        "cpu_flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "kernel": platform.release(),
        "llama_build": build_id(),
        "probe_version": str(PROBE_VERSION),
    }
    if os.environ.get(KILL_ENV):  # a test's simulated death is a machine of its own
        key["simulated_death"] = os.environ[KILL_ENV]
    return key


INTERESTING_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_int8",
                     "amx_bf16", "avx_vnni")


def machine_line() -> str:
    """One line naming the machine a figure was measured on: CPU model, its vector/matrix flags, cores, load
    and the llama.cpp build (every benchmark prints it beside its figures)."""
    model, flags = _cpuinfo()
    have = [f for f in INTERESTING_FLAGS if f in flags.split()]
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    listed = " ".join(have) or "no AVX2/AVX-512"
    return (f"machine: {model} | {os.cpu_count()} CPUs | flags: {listed}"
            f" | kernel {platform.release()} | llama.cpp build {build_id()} | load {load}")


def _key_hash(key: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


# -- the probe -----------------------------------------------------------------------------------------------


def probe_dir() -> Path:
    return models_dir() / ".native"


def probe(refresh: bool = False) -> Probe:
    """This machine's verdict: from this process's memory, else the cache file of its key, else a new probe
    (under a file lock, so concurrent first runs probe once). ``refresh`` probes again."""
    key = machine_key()
    digest = _key_hash(key)
    with _lock:
        if not refresh and digest in _memo:
            return _memo[digest]
        if os.environ.get(PROBE_ENV, "").lower() == "off":
            result = _trusted(key)
        else:
            result = _cached_or_probe(key, digest, refresh)
        _memo[digest] = result
        return result


def _trusted(key: dict[str, str]) -> Probe:
    verdicts = tuple(TypeVerdict(q, True, "not probed ($INDEXER_NATIVE_PROBE=off)") for q in PROBE_QUANTS)
    return Probe(key=key, verdicts=verdicts, chosen="f16", seconds=0.0)


def _cached_or_probe(key: dict[str, str], digest: str, refresh: bool) -> Probe:
    folder = probe_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".writable").touch()
    except OSError as exc:  # a read-only models folder: probe anyway, in a temporary folder, uncached
        logger.warning("cannot write the native probe's cache in %s (%s): probing without a cache; point "
                       "INDEXER_MODELS_DIR at a writable folder to keep the verdict", folder, exc)
        with tempfile.TemporaryDirectory(prefix="indexer-probe-") as tmp:
            return run_probe(key, Path(tmp))
    path = folder / f"probe-{digest}.json"
    message = f"another process has been probing llama.cpp in {folder} for over 2 minutes; wait or stop it"
    with lock_for(folder / "probe.lock").hold(timeout=120.0, message=message, error=ModelError):
        if not refresh:
            cached = _read(path, key)
            if cached is not None:
                return cached
        result = run_probe(key, folder)
        staged = path.with_name(f".{path.name}.{os.getpid()}.staged")
        staged.write_text(json.dumps(result.to_json(), indent=1))
        os.replace(staged, path)
    for verdict in result.excluded:
        logger.warning("llama.cpp on this machine cannot run %s weights: %s; %s is never used here",
                       verdict.quant, verdict.reason, verdict.quant)
    logger.info("native probe (%.1f s): %s", result.seconds, result.summary())
    return result


def _read(path: Path, key: dict[str, str]) -> Probe | None:
    try:
        data = json.loads(path.read_text())
        result = Probe.from_json(data)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return result if result.key == key else None


def run_probe(key: dict[str, str] | None = None, folder: Path | None = None) -> Probe:
    """Prove and time every type of :data:`PROBE_QUANTS` in child processes (see the module docstring)."""
    started = time.perf_counter()
    key = key or machine_key()
    folder = folder or probe_dir()
    models = tiny_models(folder)
    results: dict[str, dict[str, object]] = {}

    def settled(quant: str) -> bool:  # dead, failed, or proven and timed
        got = results.get(quant, {})
        return got.get("event") in ("dead", "error") or "tokens_per_s" in got or (quant == "f32" and "vectors" in got)

    pending = list(PROBE_QUANTS)
    for _ in range(len(PROBE_QUANTS) + 1):  # each round settles at least the type that killed its child
        events, died = _run_child({q: str(models[q]) for q in pending})
        for event in events:
            if event.get("event") in ("ok", "time", "error"):
                results.setdefault(str(event["quant"]), {}).update(event)
        if died is not None:
            proven = {str(e["quant"]) for e in events if e.get("event") in ("ok", "error")}
            begun = [str(e["quant"]) for e in events if e.get("event") == "start"]
            # the culprit: the type whose decode started and never finished (else the first unproven one)
            culprit = next((q for q in reversed(begun) if q not in proven),
                           next((q for q in pending if q not in proven), pending[0]))
            results[culprit] = {"event": "dead", "reason": died}
        pending = [q for q in PROBE_QUANTS if not settled(q)]
        if not pending:
            break
    cosines = _cosines(results)
    verdicts = []
    for quant in PROBE_QUANTS:
        got = results.get(quant, {})
        if got.get("event") == "dead":
            verdicts.append(TypeVerdict(quant, False, str(got["reason"])))
            continue
        if "error" in got:
            verdicts.append(TypeVerdict(quant, False, f"failed: {got['error']}"))
            continue
        tps = got.get("tokens_per_s")
        verdicts.append(TypeVerdict(quant, True, "", float(tps) if tps else None,  # type: ignore[arg-type]
                                    cosines.get(quant)))
    chosen = choose(verdicts)
    return Probe(key=key, verdicts=tuple(verdicts), chosen=chosen, seconds=round(time.perf_counter() - started, 3))


def _cosines(results: dict[str, dict[str, object]]) -> dict[str, float]:
    """Each proven type's minimum cosine to the f32 vectors of the same texts."""
    import numpy as np

    ref = results.get("f32", {}).get("vectors")
    if ref is None:
        return {}
    reference = np.asarray(ref, dtype=np.float64)
    out = {}
    for quant, got in results.items():
        if got.get("vectors") is not None:
            vectors = np.asarray(got["vectors"], dtype=np.float64)
            out[quant] = round(float(np.min(np.sum(vectors * reference, axis=1))), 7)
    return out


def choose(verdicts: list[TypeVerdict] | tuple[TypeVerdict, ...]) -> str:
    """The fastest candidate type that runs and passes the quality gate; a type must beat the one before it in
    :data:`CANDIDATE_QUANTS` by :data:`MIN_GAIN` to displace it. f16 when nothing qualifies."""
    best: TypeVerdict | None = None
    for quant in CANDIDATE_QUANTS:
        verdict = next((v for v in verdicts if v.quant == quant), None)
        if verdict is None or not passes_gate(verdict):
            continue
        if best is None or (verdict.tokens_per_s or 0.0) > (best.tokens_per_s or 0.0) * (1 + MIN_GAIN):
            best = verdict
    return best.quant if best is not None else "f16"


def passes_gate(verdict: TypeVerdict) -> bool:
    return (verdict.runs and verdict.quant in SCIFACT_GATE_PASSED and verdict.tokens_per_s is not None
            and verdict.min_cosine is not None and verdict.min_cosine >= MIN_COSINE)


def probe_texts() -> list[str]:
    """Four texts of 60 words of the tiny vocabulary (~250 tokens in all)."""
    words = TINY_WORDS
    return [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(60)) for i in range(4)]


def _run_child(models: dict[str, str]) -> tuple[list[dict[str, object]], str | None]:
    """Run the probe child on ``models`` (type -> path); its events, and why it died (None: a clean exit)."""
    request = {"models": models, "texts": probe_texts(), "untimed": "f32"}
    cmd = [sys.executable, "-m", "indexer.models.native_child", json.dumps(request)]
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, check=False)
        out, rc, err = proc.stdout, proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        events = _events(out)
        return events, f"hung for over {CHILD_TIMEOUT:.0f} s"
    events = _events(out)
    if rc == 0:
        return events, None
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        what = {"SIGILL": "illegal instruction", "SIGSEGV": "segmentation fault", "SIGABRT": "abort",
                "SIGBUS": "bus error", "SIGFPE": "arithmetic fault"}.get(name, "killed")
        return events, f"killed by {name} ({what}) in its first decode"
    tail = (err.strip().splitlines() or [""])[-1][:200]
    return events, f"exited with status {rc}: {tail}"


def _events(out: str) -> list[dict[str, object]]:
    events = []
    for line in out.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


# -- the tiny model ------------------------------------------------------------------------------------------

# MiniLM's widths (hidden 384, 12 heads of 32, FFN 1536) with one layer: the matrix kernels of the real model,
# at a size that converts and loads in milliseconds.
TINY_HIDDEN, TINY_HEADS, TINY_LAYERS, TINY_FFN, TINY_POSITIONS = 384, 12, 1, 1536, 128
TINY_WORDS = ("the", "a", "cat", "dog", "sat", "on", "mat", "fish", "swim", "river", "blue", "sky", "runs", "fast",
    "slow", "red", "green", "house", "tree", "bird", "flies", "over", "under", "water", "is", "are", "what",
    "where", "how", "why", "who", "when", "big", "small",)


def tiny_models(folder: Path) -> dict[str, Path]:
    """The probe's GGUF files (one per type of :data:`PROBE_QUANTS`), written once per converter version."""
    from indexer.models.convert import CONVERTER_VERSION, convert_checkpoint

    out = {q: folder / f"tiny-bert-c{CONVERTER_VERSION}-p{PROBE_VERSION}-{q}.gguf" for q in PROBE_QUANTS}
    if all(p.is_file() for p in out.values()):
        return out
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".tiny-") as tmp:
        ckpt = Path(tmp) / "tiny-bert"
        write_tiny_checkpoint(ckpt)
        for quant, path in out.items():
            if not path.is_file():
                convert_checkpoint(ckpt, path, quant, name="indexer-native-probe")
    return out


def write_tiny_checkpoint(root: Path, seed: int = 0) -> None:
    """A random BERT checkpoint (safetensors, config, WordPiece vocabulary, MEAN pooling) written with numpy."""
    import numpy as np

    from indexer.models.safetensors import write_safetensors

    rng = np.random.default_rng(seed)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *TINY_WORDS]
    h, f = TINY_HIDDEN, TINY_FFN

    def mat(rows: int, cols: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def vec(n: int, center: float = 0.0) -> np.ndarray:
        return (center + rng.standard_normal(n) * 0.02).astype(np.float32)

    w: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": mat(len(vocab), h, 0.5),
        "embeddings.position_embeddings.weight": mat(TINY_POSITIONS, h, 0.2),
        "embeddings.token_type_embeddings.weight": mat(2, h, 0.2),
        "embeddings.LayerNorm.weight": vec(h, 1.0),
        "embeddings.LayerNorm.bias": vec(h),
    }
    for i in range(TINY_LAYERS):
        p = f"encoder.layer.{i}."
        for part in ("query", "key", "value"):
            w[f"{p}attention.self.{part}.weight"] = mat(h, h)
            w[f"{p}attention.self.{part}.bias"] = vec(h)
        w[f"{p}attention.output.dense.weight"] = mat(h, h)
        w[f"{p}attention.output.dense.bias"] = vec(h)
        w[f"{p}attention.output.LayerNorm.weight"] = vec(h, 1.0)
        w[f"{p}attention.output.LayerNorm.bias"] = vec(h)
        w[f"{p}intermediate.dense.weight"] = mat(f, h)
        w[f"{p}intermediate.dense.bias"] = vec(f)
        w[f"{p}output.dense.weight"] = mat(h, f)
        w[f"{p}output.dense.bias"] = vec(h)
        w[f"{p}output.LayerNorm.weight"] = vec(h, 1.0)
        w[f"{p}output.LayerNorm.bias"] = vec(h)
    root.mkdir(parents=True, exist_ok=True)
    write_safetensors(root / "model.safetensors", w)
    config = {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_size": h, "num_attention_heads": TINY_HEADS,
        "num_hidden_layers": TINY_LAYERS, "intermediate_size": f, "max_position_embeddings": TINY_POSITIONS,
        "type_vocab_size": 2, "vocab_size": len(vocab), "hidden_act": "gelu", "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute",
    }
    (root / "config.json").write_text(json.dumps(config))
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (root / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    (root / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]))
    (root / "1_Pooling").mkdir(exist_ok=True)
    (root / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": h, "pooling_mode_mean_tokens": True}))


# -- the guard -----------------------------------------------------------------------------------------------


def weight_types(path: str | os.PathLike[str]) -> set[str]:
    """The types of a GGUF file's matrices (2-D tensors), by name (``q8_0``, ``f16``, ...).

    Read from the header's tensor table, skipping the metadata values (gguf-py's reader decodes every value, the
    vocabulary's strings included: 1.5 s for MiniLM, paid on every model load and ``status``)."""
    from gguf import GGMLQuantizationType

    from indexer.models.gguf_header import read_header

    try:
        header = read_header(path)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: not a readable GGUF file ({exc}); point at a .gguf model") from exc
    kinds = set()
    for dims, kind in header.tensors:
        if len(dims) >= 2 and int(dims[1]) > 1:
            try:
                kinds.add(GGMLQuantizationType(kind).name.lower())
            except ValueError:
                kinds.add(f"type{kind}")
    return kinds


def check_model_file(path: str | os.PathLike[str]) -> None:
    """Refuse, before any native call, a GGUF file with weights of a type this machine's llama.cpp cannot run
    (see :func:`probe`). A file that is not GGUF is left to llama.cpp's own error."""
    try:
        kinds = weight_types(path)
    except ModelError:
        return
    result = probe()
    bad = [v for v in result.excluded if v.quant in kinds]
    if not bad:
        return
    verdict = bad[0]
    name = Path(path).name
    raise ModelError(
        f"{name} holds {verdict.quant} weights, which llama.cpp on this machine cannot run (the probe's decode "
        f"was {verdict.reason}; CPU {result.key.get('cpu', '?')}); use another weight type: `indexer reindex "
        f"--model <name>:{result.chosen}` for a collection, `indexer models build <name> --quant {result.chosen}` "
        "for a catalogue model, or reinstall llama-cpp-python with `make llama-cpp` (its AMX fix)"
    )


def weights_status(path: str | os.PathLike[str]) -> dict[str, object]:
    """What ``indexer status`` says of a collection's model file: its weight types, whether they run here, and
    this machine's measured default (the probe's line)."""
    try:
        kinds = sorted(weight_types(path))
    except ModelError as exc:
        return {"weight_types": [], "runs_here": None, "error": str(exc)}
    result = probe()
    return {"weight_types": kinds, "runs_here": all(result.runs(k) for k in kinds),
            "machine_default": result.chosen, "probe": result.summary(), "cpu": result.key.get("cpu", "")}


def chosen_quant() -> str:
    """The measured default weight type of this machine (see :func:`choose`)."""
    return probe().chosen


def forget_memo() -> None:
    """Drop this process's memory of verdicts (tests; a reinstalled library is noticed by its key anyway)."""
    with _lock:
        _memo.clear()
