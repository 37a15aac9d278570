"""Which weight types this machine's llama.cpp runs, and which is fastest: proven in a child process.

A native path of llama.cpp can kill the whole process (llama-cpp-python 0.3.36 built natively on an Intel Xeon
with AMX dies with SIGILL on its first q8_0 decode: the AMX int8 kernel loads a tile configuration the compiler
left empty; the AMX path also takes q4_0, q4_1, q4_K, q5_K, q6_K and iq4_xs). No CPU flag says so in advance,
so every weight type is *proven* on this machine and build before its first real use:

* **eagerly**, the candidates for the default type (:data:`EAGER_QUANTS`: q8_0, bf16, f16, f32 as reference) on
  a tiny BERT of MiniLM's widths (:mod:`indexer.models.tiny_bert`): each decoded once in a child
  (:mod:`indexer.models.native_child`), the survivors timed and compared with f32;
* **lazily**, every other type (the k-quants, i-quants and legacy quants of :data:`LAZY_QUANTS`) the first time
  a file holding it is opened: a tiny model of widths that are multiples of 256 is written purely at that type
  by llama.cpp's own quantizer and decoded once in a child; the verdict joins the cached one.

Only a **native death** during the child's load or decode (SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT) excludes a
type. Anything else (SIGKILL from the OOM killer or our timeout, SIGTERM, a non-zero exit, an import error, a
Python error) leaves the type **unknown** with its reason: an unknown type is probed once more when a file needs
it, then refused with the reason. ``indexer models probe --refresh`` probes again and prints the table.

The verdict is cached in ``<models dir>/.native/`` under a key made of the CPU model and flags, the kernel
release, the llama.cpp build (a hash of its native libraries) and :data:`PROBE_VERSION`; a change of any of
them probes again. Two first runs at once share one probe (a file lock).

:func:`check_model_file` refuses, before any native call, a GGUF file (model, reranker or projector) holding a
type that is excluded or unproven; :func:`chosen_quant` is the measured default weight type (the fastest
candidate that passes the quality gate; else a type that ran; an error naming the fix when none ran).
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
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from indexer.core.location import models_dir
from indexer.core.locks import lock_for
from indexer.errors import ModelError
from indexer.models import tiny_bert
from indexer.models.gguf_header import weight_types
from indexer.models.machine import INTERESTING_FLAGS, build_id, cpuinfo, library_dir, machine_line  # noqa: F401
from indexer.models.quantize import TYPE_FTYPES
from indexer.models.tiny_bert import TINY_HIDDEN, TINY_WORDS, probe_texts  # noqa: F401 - re-exported

logger = logging.getLogger(__name__)

PROBE_VERSION = 2
#: the types proven and timed on every first run, riskiest first (a death then costs least); f32 is the reference
EAGER_QUANTS = ("q8_0", "bf16", "f16", "f32")
PROBE_QUANTS = EAGER_QUANTS  # the name older code knows
#: the types proven lazily, the first time a file holding one is opened (see the module docstring)
LAZY_QUANTS = ("q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs", "iq4_nl",
               "iq3_s", "iq3_xxs", "iq2_s", "iq2_xs", "iq2_xxs", "iq1_m", "iq1_s", "tq1_0", "tq2_0")
#: the types a catalogue model may be built with by default, in order of preference on a tie
CANDIDATE_QUANTS = ("f16", "bf16", "q8_0")
#: when no candidate qualifies: the first of these that ran (f16 is no fallback unless it ran)
FALLBACK_QUANTS = ("f16", "bf16", "q8_0", "f32")
#: quality gate on the probe model: min cosine of a type's vectors to f32's (the tests hold the real models to
#: f16/bf16 >= 0.9999 and q8_0 >= 0.999)
MIN_COSINE = 0.999
#: types whose SciFact-train nDCG@10 with the default model is within 0.003 of f16 (docs/benchmarks.md)
SCIFACT_GATE_PASSED = frozenset({"f16", "bf16", "q8_0"})
#: a type must beat the next preferred one by this fraction to be chosen over it (timing noise of the probe)
MIN_GAIN = 0.05
CHILD_TIMEOUT = 60.0  # seconds: a child that hangs is killed and its current type left unknown
PROBE_ENV = "INDEXER_NATIVE_PROBE"  # "off": trust every type, f16 unmeasured (no child; sandboxes without exec)
#: the signals by which native code dies: only these exclude a type
NATIVE_DEATHS = {"SIGILL": "illegal instruction", "SIGSEGV": "segmentation fault", "SIGBUS": "bus error",
                 "SIGFPE": "arithmetic fault", "SIGABRT": "abort"}
MAX_TRIES = 2  # an unknown type is probed once more when a file needs it, then refused
REFRESH_HINT = "`indexer models probe --refresh` probes again and prints the table"
RUNS, EXCLUDED, UNKNOWN = "runs", "excluded", "unknown"

_lock = threading.RLock()
_memo: dict[str, Probe] = {}


@dataclass(frozen=True)
class TypeVerdict:
    """One weight type on this machine: ``state`` is "runs" (its decode survived), "excluded" (native code
    died in it) or "unknown" (not proven: the reason says why); how fast, how close to f32."""

    quant: str
    state: str
    reason: str = ""  # why it is excluded or unknown ("" when it runs)
    tokens_per_s: float | None = None
    min_cosine: float | None = None  # to the f32 vectors of the same inputs (of the same tiny model)
    tries: int = 1  # probes of this type so far (an unknown type is tried MAX_TRIES times)
    lazy: bool = False  # proven the first time a file needed it

    @property
    def runs(self) -> bool:
        return self.state == RUNS

    @property
    def refused(self) -> bool:
        """Never run here: excluded, or unknown after its last try."""
        return self.state == EXCLUDED or (self.state == UNKNOWN and self.tries >= MAX_TRIES)


@dataclass(frozen=True)
class Probe:
    """The verdict of one probe: every type tried, the type chosen as default, and what it was keyed by."""

    key: dict[str, str]
    verdicts: tuple[TypeVerdict, ...]
    chosen: str  # "" when no type ran (chosen_quant() then raises, naming the fix)
    seconds: float
    created: float = field(default_factory=time.time)
    trusted: bool = False  # $INDEXER_NATIVE_PROBE=off: nothing proven, f16 unmeasured

    def verdict(self, quant: str) -> TypeVerdict | None:
        return next((v for v in self.verdicts if v.quant == quant), None)

    def runs(self, quant: str) -> bool:
        """Whether ``quant`` was proven to run here (everything, when the probe is off)."""
        if self.trusted:
            return True
        verdict = self.verdict(quant)
        return verdict is not None and verdict.runs

    @property
    def excluded(self) -> list[TypeVerdict]:
        return [v for v in self.verdicts if v.state == EXCLUDED]

    def with_verdicts(self, new: Iterable[TypeVerdict]) -> Probe:
        by_quant = {v.quant: v for v in self.verdicts}
        by_quant.update({v.quant: v for v in new})
        return replace(self, verdicts=tuple(by_quant.values()))

    def summary(self) -> str:
        """One line: the chosen type, the speed of each type, what was excluded or unknown and why."""
        if self.trusted:
            return "weight type f16, unmeasured ($INDEXER_NATIVE_PROBE=off: no type proven)"
        parts = []
        for v in self.verdicts:
            if v.quant == "f32" and v.runs:
                continue
            if v.runs:
                speed = f"{v.tokens_per_s:,.0f} tok/s" if v.tokens_per_s else "runs"
                parts.append(f"{v.quant} {speed}")
            else:
                parts.append(f"{v.quant} {v.state} ({v.reason})")
        chosen = f"weight type {self.chosen}" if self.chosen else "no weight type ran"
        return f"{chosen} (measured: {'; '.join(parts)})"

    def table(self) -> list[str]:
        """The verdict as lines of text: one per type, eager ones first (``indexer models probe``)."""
        lines = [f"{'type':<8} {'verdict':<9} {'tok/s':>9} {'cos f32':>9}  proven  reason"]
        for v in self.verdicts:
            speed = f"{v.tokens_per_s:,.0f}" if v.tokens_per_s else "-"
            cos = f"{v.min_cosine:.5f}" if v.min_cosine is not None else "-"
            when = "lazily" if v.lazy else "eagerly"
            lines.append(f"{v.quant:<8} {v.state:<9} {speed:>9} {cos:>9}  {when:<7} {v.reason}".rstrip())
        proven = {v.quant for v in self.verdicts}
        later = [q for q in LAZY_QUANTS if q not in proven]
        if later:
            lines.append(f"not yet probed (proven the first time a file holds one): {', '.join(later)}")
        return lines

    def to_json(self) -> dict[str, object]:
        return {"key": self.key, "verdicts": [asdict(v) for v in self.verdicts], "chosen": self.chosen,
                "seconds": self.seconds, "created": self.created}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Probe:
        verdicts = tuple(TypeVerdict(**v) for v in data["verdicts"])
        return cls(key=dict(data["key"]), verdicts=verdicts, chosen=str(data["chosen"]),
                   seconds=float(data["seconds"]), created=float(data.get("created", 0.0)))


# -- the key -------------------------------------------------------------------------------------------------


def machine_key() -> dict[str, str]:
    """What a verdict depends on: CPU model and flags, kernel release, llama.cpp build, probe version."""
    from indexer.models.native_child import KILL_ENV

    model, flags = cpuinfo()
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


def _key_hash(key: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


# -- the probe -----------------------------------------------------------------------------------------------


def probe_dir() -> Path:
    return models_dir() / ".native"


def probe_is_off() -> bool:
    return os.environ.get(PROBE_ENV, "").lower() == "off"


def probe(refresh: bool = False) -> Probe:
    """This machine's verdict: from this process's memory, else the cache file of its key, else a new probe
    (under a file lock, so concurrent first runs probe once). ``refresh`` probes again (eager types, and every
    lazy type proven before)."""
    key = machine_key()
    digest = _key_hash(key)
    with _lock:
        if not refresh and digest in _memo:
            return _memo[digest]
        result = _trusted(key) if probe_is_off() else _cached_or_probe(key, digest, refresh)
        _memo[digest] = result
        return result


def _trusted(key: dict[str, str]) -> Probe:
    return Probe(key=key, verdicts=(), chosen="f16", seconds=0.0, trusted=True)


def _cache_file(folder: Path, key: dict[str, str]) -> Path:
    return folder / f"probe-{_key_hash(key)}.json"


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".writable").touch()
        return True
    except OSError as exc:
        logger.warning("cannot write the native probe's cache in %s (%s): probing without a cache; point "
                       "INDEXER_MODELS_DIR at a writable folder to keep the verdict", folder, exc)
        return False


def _held(folder: Path) -> Any:
    message = f"another process has been probing llama.cpp in {folder} for over 2 minutes; wait or stop it"
    return lock_for(folder / "probe.lock").hold(timeout=120.0, message=message, error=ModelError)


def _cached_or_probe(key: dict[str, str], digest: str, refresh: bool) -> Probe:
    folder = probe_dir()
    if not _writable(folder):  # a read-only models folder: probe anyway, in a temporary folder, uncached
        with tempfile.TemporaryDirectory(prefix="indexer-probe-") as tmp:
            return run_probe(key, Path(tmp))
    path = _cache_file(folder, key)
    with _held(folder):
        old = _read(path, key)
        if not refresh and old is not None:
            return old
        result = run_probe(key, folder)
        if refresh and old is not None:  # the lazy types proven before are proven again too
            again = [v.quant for v in old.verdicts if v.lazy]
            if again:
                result = result.with_verdicts(_prove_lazily(result, again, folder, fresh=True))
        _write(path, result)
    _log(result.verdicts)
    logger.info("native probe (%.1f s): %s", result.seconds, result.summary())
    return result


def _write(path: Path, result: Probe) -> None:
    staged = path.with_name(f".{path.name}.{os.getpid()}.staged")
    staged.write_text(json.dumps(result.to_json(), indent=1))
    os.replace(staged, path)


def _log(verdicts: Iterable[TypeVerdict]) -> None:
    for v in verdicts:
        if v.state == EXCLUDED:
            logger.warning("llama.cpp on this machine cannot run %s weights: %s; %s is never used here",
                           v.quant, v.reason, v.quant)
        elif v.state == UNKNOWN:
            logger.warning("the native probe could not prove %s weights (%s; try %d of %d)", v.quant, v.reason,
                           v.tries, MAX_TRIES)


def _read(path: Path, key: dict[str, str]) -> Probe | None:
    try:
        data = json.loads(path.read_text())
        result = Probe.from_json(data)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return result if result.key == key else None


def prove(kinds: Iterable[str]) -> Probe:
    """The verdict with every type of ``kinds`` covered: a type never probed (a lazy one), or unknown after
    fewer than :data:`MAX_TRIES` tries, is probed now in a child, and its verdict joins the cached one."""
    wanted = set(kinds)
    result = probe()
    if result.trusted or not _needing(result, wanted):
        return result
    with _lock:
        folder = probe_dir()
        if not _writable(folder):
            with tempfile.TemporaryDirectory(prefix="indexer-probe-") as tmp:
                result = result.with_verdicts(_prove_lazily(result, _needing(result, wanted), Path(tmp)))
        else:
            path = _cache_file(folder, result.key)
            with _held(folder):
                current = _read(path, result.key) or result  # another process may have proven them meanwhile
                need = _needing(current, wanted)
                if need:
                    new = _prove_lazily(current, need, folder)
                    current = current.with_verdicts(new)
                    if any(q in EAGER_QUANTS for q in need):
                        current = replace(current, chosen=choose(current.verdicts))
                    _write(path, current)
                    _log(new)
                    logger.info("native probe of %s: %s", ", ".join(need), current.summary())
            result = current
        _memo[_key_hash(result.key)] = result
        return result


def _needing(result: Probe, kinds: Iterable[str]) -> list[str]:
    out = []
    for quant in sorted(set(kinds)):
        verdict = result.verdict(quant)
        if verdict is None or (verdict.state == UNKNOWN and verdict.tries < MAX_TRIES):
            out.append(quant)
    return out


def run_probe(key: dict[str, str] | None = None, folder: Path | None = None) -> Probe:
    """Prove and time the candidates of :data:`EAGER_QUANTS` in child processes (see the module docstring)."""
    started = time.perf_counter()
    key = key or machine_key()
    folder = folder or probe_dir()
    models = tiny_bert.tiny_models(folder, PROBE_VERSION)
    results = _decode_all({q: str(models[q]) for q in EAGER_QUANTS}, timed=True)
    cosines = _cosines(results)
    verdicts = [_verdict(q, results.get(q, {}), None, False, cosines.get(q)) for q in EAGER_QUANTS]
    return Probe(key=key, verdicts=tuple(verdicts), chosen=choose(verdicts),
                 seconds=round(time.perf_counter() - started, 3))


def _prove_lazily(result: Probe, quants: list[str], folder: Path, fresh: bool = False) -> list[TypeVerdict]:
    """Probe ``quants`` now: eager types on the MiniLM-width files (timed), the others on a 256-width file
    written purely at that type by llama.cpp's quantizer (one decode each, compared with its f32)."""
    old = {q: (None if fresh else result.verdict(q)) for q in quants}
    out: list[TypeVerdict] = []
    eager = [q for q in quants if q in EAGER_QUANTS]
    if eager:
        models = tiny_bert.tiny_models(folder, PROBE_VERSION)
        runs = {q: str(models[q]) for q in dict.fromkeys([*eager, "f32"])}
        results = _decode_all(runs, timed=True)
        cosines = _cosines(results)
        out += [_verdict(q, results.get(q, {}), old[q], False, cosines.get(q)) for q in eager]
    lazy = [q for q in quants if q not in EAGER_QUANTS]
    if lazy:
        reference, files = tiny_bert.quantized_models(folder, lazy, PROBE_VERSION)
        runs = {q: str(p) for q, p in files.items() if isinstance(p, Path)}
        results = _decode_all({**runs, "f32": str(reference)}, timed=False) if runs else {}
        cosines = _cosines(results)
        for quant in lazy:
            got = files[quant]
            if isinstance(got, Path):
                out.append(_verdict(quant, results.get(quant, {}), old[quant], True, cosines.get(quant)))
            else:  # not written: unknown (a type the quantizer cannot write at all is not tried again)
                before = old[quant]
                tries = MAX_TRIES if quant not in TYPE_FTYPES else (before.tries + 1 if before is not None else 1)
                out.append(TypeVerdict(quant, UNKNOWN, got, tries=tries, lazy=True))
    return out


def _verdict(quant: str, got: dict[str, object], old: TypeVerdict | None, lazy: bool,
             cosine: float | None) -> TypeVerdict:
    tries = old.tries + 1 if old is not None else 1
    event = got.get("event")
    if event == "dead":
        return TypeVerdict(quant, EXCLUDED, str(got["reason"]), tries=tries, lazy=lazy)
    if event == "unknown":
        return TypeVerdict(quant, UNKNOWN, str(got["reason"]), tries=tries, lazy=lazy)
    if "error" in got:
        return TypeVerdict(quant, UNKNOWN, f"failed: {got['error']}", tries=tries, lazy=lazy)
    if got.get("vectors") is None:
        return TypeVerdict(quant, UNKNOWN, "the probe's child never decoded it", tries=tries, lazy=lazy)
    tps = got.get("tokens_per_s")
    speed = float(tps) if isinstance(tps, (int, float)) and tps else None
    return TypeVerdict(quant, RUNS, "", speed, cosine, tries=tries, lazy=lazy)


def _decode_all(models: dict[str, str], *, timed: bool) -> dict[str, dict[str, object]]:
    """Decode each of ``models`` (type -> file; "f32" is the untimed reference) in children: after a native
    death the child is started again for the types not yet tried; after any other failure the types not yet
    tried are left unknown (a hang or an OOM kill says nothing of them, and trying again would wait again)."""
    results: dict[str, dict[str, object]] = {}

    def settled(quant: str) -> bool:  # dead, unknown, failed, or proven (and timed, where timing is asked)
        got = results.get(quant, {})
        if got.get("event") in ("dead", "unknown") or "error" in got:
            return True
        if "vectors" not in got:
            return False
        return not timed or quant == "f32" or "tokens_per_s" in got

    pending = list(models)
    for _ in range(len(models) + 1):  # each round settles at least the type that killed its child
        events, death = _run_child({q: models[q] for q in pending}, timed=timed)
        for event in events:
            if event.get("event") in ("ok", "time", "error"):
                results.setdefault(str(event["quant"]), {}).update(event)
        if death is not None:
            native_death, reason = death
            proven = {str(e["quant"]) for e in events if e.get("event") in ("ok", "error")}
            begun = [str(e["quant"]) for e in events if e.get("event") == "start"]
            # the culprit: the type whose load or decode started and never finished
            culprit = next((q for q in reversed(begun) if q not in proven), None)
            if culprit is None:  # it died while timing types that had all decoded: they run, untimed
                logger.warning("the native probe's child died while timing (%s); the types stay untimed", reason)
                break
            results[culprit] = {"event": "dead" if native_death else "unknown", "reason": reason}
            if not native_death:
                for quant in pending:  # a type that decoded before stays proven (untimed)
                    if not settled(quant) and "vectors" not in results.get(quant, {}):
                        results[quant] = {"event": "unknown", "reason": f"not tried: the probe's child ended "
                                          f"while trying {culprit} ({reason})"}
                break
        pending = [q for q in models if not settled(q)]
        if not pending:
            break
    return results


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
    :data:`CANDIDATE_QUANTS` by :data:`MIN_GAIN` to displace it. Else the first of :data:`FALLBACK_QUANTS` that
    ran; "" when none ran."""
    best: TypeVerdict | None = None
    for quant in CANDIDATE_QUANTS:
        verdict = next((v for v in verdicts if v.quant == quant), None)
        if verdict is None or not passes_gate(verdict):
            continue
        if best is None or (verdict.tokens_per_s or 0.0) > (best.tokens_per_s or 0.0) * (1 + MIN_GAIN):
            best = verdict
    if best is not None:
        return best.quant
    ran = {v.quant for v in verdicts if v.runs}
    return next((q for q in FALLBACK_QUANTS if q in ran), "")


def passes_gate(verdict: TypeVerdict) -> bool:
    return (verdict.runs and verdict.quant in SCIFACT_GATE_PASSED and verdict.tokens_per_s is not None
            and verdict.min_cosine is not None and verdict.min_cosine >= MIN_COSINE)


def _run_child(models: dict[str, str], *, timed: bool = True) -> tuple[list[dict[str, object]],
                                                                       tuple[bool, str] | None]:
    """Run the probe child on ``models`` (type -> path); its events, and how it died: (a native death?, the
    reason), None for a clean exit."""
    request = {"models": models, "texts": probe_texts(), "untimed": "f32", "time": timed}
    cmd = [sys.executable, "-m", "indexer.models.native_child", json.dumps(request)]
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, check=False)
        out, rc, err = proc.stdout, proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return _events(out), (False, f"hung for over {CHILD_TIMEOUT:.0f} s and was killed (a loaded machine?)")
    events = _events(out)
    if rc == 0:
        return events, None
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        if name in NATIVE_DEATHS:
            return events, (True, f"killed by {name} ({NATIVE_DEATHS[name]}) in its load or first decode")
        return events, (False, f"killed by {name} from outside (the OOM killer, a timeout or a stop), not a "
                               "native fault")
    tail = (err.strip().splitlines() or [""])[-1][:200]
    return events, (False, f"exited with status {rc}: {tail}")


def _events(out: str) -> list[dict[str, object]]:
    events = []
    for line in out.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def tiny_models(folder: Path) -> dict[str, Path]:
    """The probe's MiniLM-width files (see :mod:`indexer.models.tiny_bert`)."""
    return tiny_bert.tiny_models(folder, PROBE_VERSION)


# -- the guard -----------------------------------------------------------------------------------------------


def check_model_file(path: str | os.PathLike[str]) -> None:
    """Refuse, before any native call, a GGUF file (a model, a reranker, a projector, an adapter) holding a
    weight type this machine's llama.cpp cannot run or that the probe could not prove; a type not proven yet is
    proven first (:func:`prove`). A file that is not GGUF is left to llama.cpp's own error."""
    try:
        kinds = weight_types(path)
    except ModelError:
        return
    if probe_is_off():
        return
    result = prove(kinds)
    bad = [v for v in (result.verdict(k) for k in sorted(kinds)) if v is not None and not v.runs]
    if not bad:
        return
    verdict = next((v for v in bad if v.state == EXCLUDED), bad[0])
    name = Path(path).name
    if verdict.state == EXCLUDED:
        what = f"which llama.cpp on this machine cannot run (the probe's decode was {verdict.reason}"
    else:
        what = (f"which the native probe could not prove on this machine ({verdict.reason}; tried "
                f"{verdict.tries} times")
    if result.chosen:
        fix = (f"use another weight type: `indexer reindex --model <name>:{result.chosen}` for a collection, "
               f"`indexer models build <name> --quant {result.chosen}` for a catalogue model, or reinstall "
               "llama-cpp-python with `make llama-cpp` (its AMX fix)")
    else:
        fix = "no weight type ran in the probe here: reinstall llama-cpp-python with `make llama-cpp`"
    raise ModelError(f"{name} holds {verdict.quant} weights, {what}; CPU {result.key.get('cpu', '?')}); {fix}; "
                     f"{REFRESH_HINT}")


def weights_status(path: str | os.PathLike[str]) -> dict[str, object]:
    """What ``indexer status`` says of a collection's model file: its weight types, each type's verdict here
    (runs, excluded, unknown, or not probed yet), and this machine's measured default (the probe's line)."""
    try:
        kinds = sorted(weight_types(path))
    except ModelError as exc:
        return {"weight_types": [], "runs_here": None, "error": str(exc)}
    result = probe()
    states = {k: ("runs" if result.trusted else (v.state if (v := result.verdict(k)) else "not probed yet"))
              for k in kinds}
    runs_here = all(s == RUNS for s in states.values()) if all(s != "not probed yet" for s in states.values()) \
        else None
    return {"weight_types": kinds, "verdicts": states, "runs_here": runs_here,
            "machine_default": result.chosen, "probe": result.summary(), "cpu": result.key.get("cpu", "")}


def no_type_ran(result: Probe) -> str:
    reasons = "; ".join(f"{v.quant}: {v.reason}" for v in result.verdicts if not v.runs)
    return (f"no weight type ran in the native probe on this machine ({reasons or 'nothing probed'}); "
            f"{REFRESH_HINT}, or reinstall llama-cpp-python with `make llama-cpp`; INDEXER_NATIVE_PROBE=off "
            "trusts f16 unmeasured")


def chosen_quant() -> str:
    """The measured default weight type of this machine (see :func:`choose`); ModelError when none ran."""
    result = probe()
    if not result.chosen:
        raise ModelError(no_type_ran(result))
    return result.chosen


def forget_memo() -> None:
    """Drop this process's memory of verdicts (tests; a reinstalled library is noticed by its key anyway)."""
    with _lock:
        _memo.clear()
