"""The native probe's cost: the eager probe's wall time on a first run (budget: 3 s on a 2-core machine) and a
lazy proof's cost per file (a file's types, the first time it is opened), each in a fresh models folder.

    .venv/bin/python bench/native_probe.py [--runs 3]

Each run is a new process (as a user's first `indexer` command is): the wall time includes starting Python,
writing the tiny models and every child. Prints the machine line first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CODE = """
import json, sys, time
t = time.perf_counter()
from indexer.models import native
result = native.probe()
eager = time.perf_counter() - t
lazy = {}
for group in (("q4_K", "q6_K"), ("q5_0", "q8_0"), ("iq4_xs",)):
    t = time.perf_counter()
    native.prove(group)
    lazy["+".join(group)] = time.perf_counter() - t
print(json.dumps({"eager": eager, "probe_seconds": result.seconds, "chosen": result.chosen, "lazy": lazy,
                  "summary": native.prove(()).summary()}))
"""


def main() -> int:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    walls, lazies = [], {}
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="probe-bench-") as tmp:
            env = {**os.environ, "INDEXER_MODELS_DIR": tmp}
            env.pop("INDEXER_NATIVE_PROBE", None)
            done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env,
                                  timeout=600, check=True)
            data = json.loads(done.stdout.strip().splitlines()[-1])
        walls.append(data["eager"])
        for key, value in data["lazy"].items():
            lazies.setdefault(key, []).append(value)
        print(f"run {i + 1}: eager probe {data['eager']:.2f} s wall (import + tiny models + children; "
              f"probe itself {data['probe_seconds']:.2f} s), chosen {data['chosen']}; lazy: "
              + ", ".join(f"{k} {v:.2f} s" for k, v in data["lazy"].items()), flush=True)
    print(f"eager probe: median {statistics.median(walls):.2f} s, max {max(walls):.2f} s over {len(walls)} runs "
          "(budget 3 s)")
    for key, values in lazies.items():
        print(f"lazy proof of {key}: median {statistics.median(values):.2f} s")
    print(data["summary"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
