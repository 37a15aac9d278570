"""The OpenMP threads of one FAISS query, and how FAISS's OpenMP threads wait between queries.

One query runs on one thread (``FaissStore(search_threads=1)``): FAISS's scans of flat, int8, SQ8 and HNSW indexes
gain little from a second thread for one query, and a thread that must wait for a busy core costs more than it
saves (4x slower on a busy 2-core machine: docs/stores.md). The exception is the fast scan of ``pq`` codes, which
splits one query's lists over threads (FAISS's ``implem`` 15: plugins/faiss/index.py): it takes the cores that are
idle when the query starts (:func:`idle_threads`: the kernel's count of runnable tasks, which counts the caller),
at most ``SPLIT_MAX``, and one thread on a busy machine. Measured on the 1M boilerplate set (AMD EPYC Zen 3, 2
vCPUs): idle, two threads 1.39 ms against 1.82 on one; with one core busy, two threads 4.66 ms (p95 32 ms) against
2.60 on one, so the choice is made per query (docs/benchmarks.md#recall-session-14).

FAISS's bundled OpenMP runtime is loaded with ``OMP_WAIT_POLICY=PASSIVE`` (:func:`load_faiss`; unless the
environment names a policy or a spin count, or FAISS was imported before this package): its threads sleep between
parallel regions instead of spinning, so a two-thread query leaves no spinning thread behind that the next query
would count as a busy core (measured: the per-query choice found the idle core for 0 % of the queries with
spinning threads, 99 % without) or that would take a busy core's time. The environment is restored once FAISS is
loaded, so other OpenMP runtimes (llama.cpp's) keep their own policy.
"""

from __future__ import annotations

import os
import sys

SPLIT_MAX = 2  # the most threads one pq query uses (measured on 2 vCPUs; more cores were not measured)
_NAMED = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def load_faiss() -> None:
    """Import FAISS with its OpenMP threads waiting passively (module docstring); a no-op once it is loaded."""
    if "faiss" in sys.modules:
        return
    named = any(key in os.environ for key in _NAMED)
    if not named:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        import faiss  # noqa: F401  (its OpenMP runtime reads the environment when it is loaded)
    finally:
        if not named:
            os.environ.pop("OMP_WAIT_POLICY", None)


def idle_threads(most: int = SPLIT_MAX, loadavg: str = "/proc/loadavg") -> int:
    """Threads one query may use now: its own, plus one per core idle at this moment (the cores this process may
    run on, less the runnable tasks the kernel counts, the caller included), at most ``most``; one when the count
    cannot be read (not Linux)."""
    try:
        with open(loadavg, "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
        cores = len(os.sched_getaffinity(0))
    except (OSError, ValueError, IndexError, AttributeError):
        return 1
    return max(1, min(int(most), cores - running + 1))
